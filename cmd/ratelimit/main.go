// Command sluice-ratelimit is Envoy's rate limit service
// (envoy.service.ratelimit.v3.RateLimitService) in place of
// envoyproxy/ratelimit: the same configuration files and environment, the
// decisions of Sluice's limiter (enforcer/rls). It links the limiter and
// the wire format, not the enforcer's proxy.
package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/internal/buildinfo"
	"github.com/sluice-dev/sluice/internal/program"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

func buildVersion() string { return buildinfo.Version(version) }

func main() { program.Main(run) }

// run is the whole program: it returns the exit status.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	prog := program.Program{Name: "sluice-ratelimit", Version: buildVersion()}
	o, fs, err := parseFlags(args, lookupEnv)
	flags := program.Flags{Err: err, Usage: func() string { return usage(fs) }}
	if err == nil {
		flags.Help, flags.Version = o.help, o.version
	}
	if status, ok := prog.Parsed(flags, stdout, stderr); !ok {
		return status
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))
	redis.SetLogger(quietRedis{})
	return prog.Serve(ctx, stderr, log, func() (program.Server, error) { return newService(o, lookupEnv, log) })
}

// quietRedis drops go-redis' own lines (one per failed dial during an
// outage): /readyz and the metrics report Redis instead.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
