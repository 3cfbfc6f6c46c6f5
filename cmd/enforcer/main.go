// Command sluice-enforcer is the Sluice rate limiting sidecar: a reverse
// proxy in front of an application that checks every request against the
// rate limits of its RateLimitPolicies in Redis. docs/enforcer.md is its
// contract: flags, configuration, headers, endpoints and metrics.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/sluice-dev/sluice/internal/buildinfo"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version, or "devel".
var version = ""

func buildVersion() string { return buildinfo.Version(version) }

// Exit statuses.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
	exitConfig  = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

// run is the whole program: it returns the exit status.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	o, fs, err := parseFlags(args, lookupEnv, stderr)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "sluice-enforcer: %v\nRun sluice-enforcer --help for the flags.\n", trimUsage(err))
		return exitUsage
	case o.help:
		fmt.Fprint(stdout, usage(fs))
		return exitOK
	case o.version:
		fmt.Fprintf(stdout, "sluice-enforcer %s\n", buildVersion())
		return exitOK
	}
	if !o.pprof {
		// No heap profile is served: sampling allocations for one costs
		// CPU and the runtime's profile buckets (about 1.4 MB).
		runtime.MemProfileRate = 0
	}
	log := newLogger(stderr, o.logLevel)
	e, err := newEnforcer(o, lookupEnv, log)
	if err != nil {
		var ce *configError
		if errors.As(err, &ce) {
			fmt.Fprintf(stderr, "sluice-enforcer: invalid configuration: %v\n", ce.err)
			return exitConfig
		}
		log.Error("cannot start", "error", err)
		return exitRuntime
	}
	if err := e.serve(ctx); err != nil {
		log.Error("stopped", "error", err)
		return exitRuntime
	}
	return exitOK
}

// trimUsage drops the errUsage marker from a message.
func trimUsage(err error) string {
	msg := err.Error()
	if p := errUsage.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p):]
	}
	return msg
}
