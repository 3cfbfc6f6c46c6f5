package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluice-dev/sluice/enforcer/admin"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/internal/program"
)

// options are the command line, after the environment filled what the
// flags left unset.
type options struct {
	listen, adminListen string
	debugListen         string
	statusTokenFile     string
	writeTokenFile      string
	trustedPeerArgs     []string
	trustedPeers        []netip.Addr
	upstream            *url.URL
	// upstreamProtocol is how to forward while no policy selects the pod.
	upstreamProtocol config.UpstreamProtocol
	redisURL         string
	redisPoolSize    int
	// localFallbackMaxEntries bounds each Redis backend's LocalFallback state.
	localFallbackMaxEntries int
	configPath              string
	policyPaths             []string
	labelsPath              string
	podName, podNS          string
	shutdownTimeout         time.Duration
	drainDelay              time.Duration
	logLevel                slog.Level
	pprof                   bool
	limits                  serverLimits
	version, help           bool
}

// envPrefix starts the environment variable of every flag:
// --admin-listen is SLUICE_ADMIN_LISTEN.
const envPrefix = "SLUICE_"

func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func newFlagSet(o *options, upstream, upstreamProtocol, logLevel *string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("sluice-enforcer", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.StringVar(&o.listen, "listen", ":9080", "address the proxy listens on (clients and the Service's targetPort)")
	fs.StringVar(upstream, "upstream", "", "base URL of the application, e.g. http://127.0.0.1:8080 (required)")
	fs.StringVar(upstreamProtocol, "upstream-protocol", string(config.UpstreamHTTP1), "HTTP1 or H2C (cleartext HTTP/2, gRPC servers): how to forward while no policy selects the pod; the policies' spec.upstreamProtocol wins")
	fs.StringVar(&o.adminListen, "admin-listen", ":9901", "address of the admin listener: /healthz /readyz /metrics /status")
	fs.StringVar(&o.debugListen, "debug-listen", "127.0.0.1:9902", "loopback address of the debug listener: /debug/tenant, /debug/pprof/ (reach it with kubectl port-forward pod/NAME 9902); empty turns it off")
	fs.StringVar(&o.statusTokenFile, "status-token-file", "", "file holding the read token: the bearer token /status, GET /bans and /debug/tenant on the admin listener require (the operator's Secret volume); unset: they serve 127.0.0.1 and ::1 only, or the --admin-trusted-peer addresses")
	fs.StringVar(&o.writeTokenFile, "write-token-file", "", "file holding the write token: the bearer token DELETE /tenant and DELETE /bans require (it reads too); unset: they serve the --admin-trusted-peer addresses only, nobody without them")
	fs.StringArrayVar(&o.trustedPeerArgs, "admin-trusted-peer", nil, "exact IP address served on the admin listener without a token, where no token file covers the call (repeatable; in the environment, comma-separated); under a service mesh sidecar remote callers arrive from loopback: use the token files there")
	fs.StringVar(&o.redisURL, "redis-url", "redis://127.0.0.1:6379", "default Redis: redis://, rediss://, redis+sentinel:// or redis+cluster:// URL")
	fs.IntVar(&o.redisPoolSize, "redis-pool-size", 0, "connections per Redis node (0: 10 per CPU)")
	fs.IntVar(&o.localFallbackMaxEntries, "local-fallback-max-entries", limiter.DefaultLocalMaxEntries, "keys each Redis backend's LocalFallback state holds while Redis is down; beyond it new tenants are admitted unlimited (gauge sluice_enforcer_local_fallback_entries)")
	fs.StringVar(&o.configPath, "config", "", "compiled configuration (JSON, schema sluice.dev/enforcer-config/v1), as the operator writes it")
	fs.StringArrayVar(&o.policyPaths, "policy-file", nil, "RateLimitPolicy YAML, compiled at start and on each change by sluice-policy-compile, which must be beside sluice-enforcer (as in its image) or on PATH (repeatable; in the environment, comma-separated)")
	fs.StringVar(&o.labelsPath, "labels-file", "", "the pod's labels (downward API file): only policies selecting them apply; unset: every policy applies")
	fs.StringVar(&o.podName, "pod-name", "", "pod name, reported on /status")
	fs.StringVar(&o.podNS, "pod-namespace", "", "pod namespace, reported on /status; namespace of policy files that name none")
	addServerFlags(fs, &o.limits)
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 25*time.Second, "how long in-flight requests may finish after SIGTERM")
	fs.DurationVar(&o.drainDelay, "drain-delay", 5*time.Second, "how long GET "+DrainPath+" on the admin listener (the application's preStop hook) waits, client connections closing after their response, before the kubelet stops the application")
	fs.StringVar(logLevel, "log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&o.pprof, "pprof", false, "serve Go profiles (net/http/pprof) under /debug/pprof/ on the debug listener")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.BoolVarP(&o.help, "help", "h", false, "print this help and exit")
	return fs
}

// parseFlags reads args, then the SLUICE_* environment for every flag not
// given on the command line (the command line wins).
func parseFlags(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) (*options, *pflag.FlagSet, error) {
	o := &options{}
	var upstream, upstreamProtocol, logLevel string
	fs := newFlagSet(o, &upstream, &upstreamProtocol, &logLevel)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return nil, fs, fmt.Errorf("%w: %w", program.ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("%w: unexpected argument %q: every option is a --flag", program.ErrUsage, fs.Arg(0))
	}
	var envErr error
	fs.VisitAll(func(f *pflag.Flag) {
		name := envName(f.Name)
		v, ok := lookupEnv(name)
		if f.Changed || !ok || v == "" || envErr != nil {
			return
		}
		values := []string{v}
		if f.Name == "policy-file" || f.Name == "admin-trusted-peer" {
			values = strings.Split(v, ",")
		}
		for _, v := range values {
			if err := fs.Set(f.Name, strings.TrimSpace(v)); err != nil {
				envErr = fmt.Errorf("%w: %s=%q: %w", program.ErrUsage, name, v, err)
			}
		}
	})
	if envErr != nil {
		return nil, fs, envErr
	}
	if o.help || o.version {
		return o, fs, nil
	}
	o.upstreamProtocol = config.UpstreamProtocol(upstreamProtocol)
	if err := o.validate(upstream, logLevel); err != nil {
		return nil, fs, fmt.Errorf("%w: %w", program.ErrUsage, err)
	}
	return o, fs, nil
}

func (o *options) validate(upstream, logLevel string) error {
	if upstream == "" {
		return errors.New("--upstream is required (the application's base URL, e.g. http://127.0.0.1:8080)")
	}
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--upstream %q must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:8080", upstream)
	}
	o.upstream = u
	switch {
	case !slices.Contains(config.UpstreamProtocols, o.upstreamProtocol):
		return fmt.Errorf("--upstream-protocol %q is not one of HTTP1, H2C", o.upstreamProtocol)
	case o.configPath == "" && len(o.policyPaths) == 0:
		return errors.New("one of --config or --policy-file is required")
	case o.configPath != "" && len(o.policyPaths) > 0:
		return errors.New("--config and --policy-file cannot be used together")
	case o.listen == "" || o.adminListen == "":
		return errors.New("--listen and --admin-listen must not be empty")
	case o.listen == o.adminListen:
		return fmt.Errorf("--listen and --admin-listen are both %s", o.listen)
	case o.debugListen != "" && (o.debugListen == o.listen || o.debugListen == o.adminListen):
		return fmt.Errorf("--debug-listen %s is also --listen or --admin-listen", o.debugListen)
	case o.redisURL == "":
		return errors.New("--redis-url must not be empty")
	case o.shutdownTimeout < 0:
		return errors.New("--shutdown-timeout must not be negative")
	case o.drainDelay < 0:
		return errors.New("--drain-delay must not be negative")
	case o.redisPoolSize < 0:
		return errors.New("--redis-pool-size must not be negative")
	case o.localFallbackMaxEntries < 1:
		return errors.New("--local-fallback-max-entries must be at least 1")
	}
	if err := validateLoopback(o.debugListen); err != nil {
		return err
	}
	if o.trustedPeers, err = admin.ParsePeers(o.trustedPeerArgs); err != nil {
		return fmt.Errorf("--admin-trusted-peer: %w", err)
	}
	if err := o.limits.validate(); err != nil {
		return err
	}
	// Parse the URL now (no connection is made), so a typo is a command
	// line error and not a configuration one.
	client, err := limiter.NewClient(o.redisURL, limiter.ClientOptions{})
	if err != nil {
		return fmt.Errorf("--redis-url: %w", err)
	}
	_ = client.Close()
	if err := o.logLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("--log-level %q is not one of debug, info, warn, error", logLevel)
	}
	return nil
}

// validateLoopback refuses a debug address that other pods could reach:
// /debug shows every tenant's usage.
func validateLoopback(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--debug-listen %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--debug-listen %q must be a loopback address such as 127.0.0.1:9902: /debug shows tenants' usage to whoever reaches it", addr)
	}
	return nil
}

// usage is the --help text.
func usage(fs *pflag.FlagSet) string {
	return `sluice-enforcer: the Sluice rate limiting sidecar.

It proxies HTTP requests to the application after checking them against the
rate limits of its RateLimitPolicies in Redis: over the limit, it answers
429 with Retry-After and an application/problem+json body.

Usage:
  sluice-enforcer --upstream http://127.0.0.1:8080 (--config FILE | --policy-file FILE...) [flags]

Flags (each also read from the environment as SLUICE_<FLAG>, e.g.
SLUICE_ADMIN_LISTEN; the command line wins):
` + fs.FlagUsages() + `
Exit status: 0 after a clean shutdown, 1 on a runtime failure (a listener
cannot start), 2 on a command line error, 3 when the configuration cannot
be loaded at start.
`
}
