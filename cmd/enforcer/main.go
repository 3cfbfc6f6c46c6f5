// Command sluice-enforcer is the Sluice rate limiting sidecar: a reverse
// proxy in front of an application that checks every request against the
// rate limits of its RateLimitPolicies in Redis. docs/enforcer.md is its
// contract: flags, configuration, headers, endpoints and metrics.
package main

import (
	"context"
	"io"
	"runtime"

	"github.com/sluice-dev/sluice/internal/buildinfo"
	"github.com/sluice-dev/sluice/internal/program"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version, or "devel".
var version = ""

func buildVersion() string { return buildinfo.Version(version) }

func main() { program.Main(run) }

// run is the whole program: it returns the exit status.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	prog := program.Program{Name: "sluice-enforcer", Version: buildVersion()}
	o, fs, err := parseFlags(args, lookupEnv, stderr)
	flags := program.Flags{Err: err, Usage: func() string { return usage(fs) }}
	if err == nil {
		flags.Help, flags.Version = o.help, o.version
	}
	if status, ok := prog.Parsed(flags, stdout, stderr); !ok {
		return status
	}
	if !o.pprof {
		// No heap profile is served: sampling allocations for one costs
		// CPU and the runtime's profile buckets (about 1.4 MB).
		runtime.MemProfileRate = 0
	}
	log := newLogger(stderr, o.logLevel)
	return prog.Serve(ctx, stderr, log, func() (program.Server, error) { return newEnforcer(o, lookupEnv, log) })
}
