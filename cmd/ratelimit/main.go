// Command sluice-ratelimit is Envoy's rate limit service
// (envoy.service.ratelimit.v3.RateLimitService) in place of
// envoyproxy/ratelimit: the same configuration files and environment, the
// decisions of Sluice's limiter (enforcer/rls). It links the limiter and
// the wire format, not the enforcer's proxy.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/internal/buildinfo"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

func buildVersion() string { return buildinfo.Version(version) }

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

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	o, fs, err := parseFlags(args, lookupEnv)
	switch {
	case err != nil:
		msg := err.Error()
		if p := errUsage.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
			msg = msg[len(p):]
		}
		fmt.Fprintf(stderr, "sluice-ratelimit: %s\nRun sluice-ratelimit --help for the flags.\n", msg)
		return exitUsage
	case o.help:
		fmt.Fprint(stdout, usage(fs))
		return exitOK
	case o.version:
		fmt.Fprintf(stdout, "sluice-ratelimit %s\n", buildVersion())
		return exitOK
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))
	redis.SetLogger(quietRedis{})
	s, err := newService(o, lookupEnv, log)
	if err != nil {
		var ce *configError
		if errors.As(err, &ce) {
			fmt.Fprintf(stderr, "sluice-ratelimit: invalid configuration: %v\n", ce.err)
			return exitConfig
		}
		log.Error("cannot start", "error", err)
		return exitRuntime
	}
	if err := s.serve(ctx); err != nil {
		log.Error("stopped", "error", err)
		return exitRuntime
	}
	return exitOK
}

// quietRedis drops go-redis' own lines (one per failed dial during an
// outage): /readyz and the metrics report Redis instead.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
