package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/sluice-dev/sluice/enforcer/rls"
)

// boundFlags are the flags of rls.Bounds, each with Sluice's variable for
// it: envoyproxy/ratelimit bounds nothing.
func boundFlags(b *rls.Bounds) []struct {
	flag, env string
	dst       *int
} {
	return []struct {
		flag, env string
		dst       *int
	}{
		{"max-descriptors", "SLUICE_MAX_DESCRIPTORS", &b.Descriptors},
		{"max-descriptor-entries", "SLUICE_MAX_DESCRIPTOR_ENTRIES", &b.Entries},
		{"max-entry-bytes", "SLUICE_MAX_ENTRY_BYTES", &b.EntryBytes},
		{"max-call-bytes", "SLUICE_MAX_CALL_BYTES", &b.CallBytes},
	}
}

func addBoundFlags(fs *pflag.FlagSet, b *rls.Bounds) {
	d := rls.DefaultBounds
	fs.IntVar(&b.Descriptors, "max-descriptors", d.Descriptors, "descriptors one call may have (env SLUICE_MAX_DESCRIPTORS)")
	fs.IntVar(&b.Entries, "max-descriptor-entries", d.Entries, "entries one descriptor may have (env SLUICE_MAX_DESCRIPTOR_ENTRIES)")
	fs.IntVar(&b.EntryBytes, "max-entry-bytes", d.EntryBytes, "bytes of one entry's key, and of its value (env SLUICE_MAX_ENTRY_BYTES)")
	fs.IntVar(&b.CallBytes, "max-call-bytes", d.CallBytes, "bytes of all the keys and values of one call (env SLUICE_MAX_CALL_BYTES)")
}

// boundsFromEnv fills the bound flags not given from Sluice's variables.
func boundsFromEnv(fs *pflag.FlagSet, b *rls.Bounds, env func(string) string) error {
	for _, f := range boundFlags(b) {
		if v := env(f.env); v != "" && !fs.Changed(f.flag) {
			if err := fs.Set(f.flag, v); err != nil {
				return fmt.Errorf("%s=%q: %w", f.env, v, err)
			}
		}
	}
	return nil
}

func validateBounds(b *rls.Bounds) error {
	for _, f := range boundFlags(b) {
		if *f.dst < 1 {
			return fmt.Errorf("--%s %d must be at least 1", f.flag, *f.dst)
		}
	}
	return nil
}
