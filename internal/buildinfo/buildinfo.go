// Package buildinfo tells a program's version, the same way for each of
// them.
package buildinfo

import "runtime/debug"

// Version is stamped, the version set at build time with -ldflags
// "-X main.version=v1.2.3", when there is one; else the module version
// `go install` records; else "devel".
func Version(stamped string) string {
	if stamped != "" {
		return stamped
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
