package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rls"
	"github.com/sluice-dev/sluice/enforcer/rls/erlconfig"
	"github.com/sluice-dev/sluice/internal/program"
)

// options are the command line, after envoyproxy/ratelimit's environment
// variables filled what the flags left unset.
type options struct {
	listen, httpListen, adminListen string
	redisURL                        string
	configDir                       string
	namespace                       string
	failureMode                     string
	redisTimeout                    time.Duration
	mergeDomains, ignoreDotFiles    bool
	tls                             tlsOptions
	shutdownTimeout                 time.Duration
	logLevel                        slog.Level
	headers                         headerOptions
	bounds                          rls.Bounds
	admin                           adminOptions
	version, help                   bool
}

// ERL's defaults (envoyproxy/ratelimit's settings).
const (
	defaultRuntimeRoot = "/srv/runtime_data/current"
	defaultRedisURL    = "redis://127.0.0.1:6379"
)

func newFlagSet(o *options, logLevel *string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("sluice-ratelimit", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.StringVar(&o.listen, "listen", ":8081", "gRPC address of the rate limit service (env GRPC_HOST, GRPC_PORT)")
	fs.StringVar(&o.httpListen, "http-listen", ":8080", "HTTP address of /healthcheck, as envoyproxy/ratelimit's (env HOST, PORT); empty turns it off")
	fs.StringVar(&o.adminListen, "admin-listen", ":6070", "admin address: /metrics /healthz /readyz /healthcheck /status (env DEBUG_HOST, DEBUG_PORT)")
	fs.StringVar(&o.tls.certFile, "tls-cert-file", "", "serve gRPC over TLS with this PEM certificate chain, re-read when it changes (env GRPC_SERVER_TLS_CERT with GRPC_SERVER_USE_TLS)")
	fs.StringVar(&o.tls.keyFile, "tls-key-file", "", "the PEM private key of --tls-cert-file (env GRPC_SERVER_TLS_KEY)")
	fs.StringVar(&o.tls.clientCAFile, "tls-client-ca-file", "", "require client certificates signed by a CA of this PEM file (env GRPC_CLIENT_TLS_CACERT)")
	fs.StringVar(&o.tls.clientSAN, "tls-client-san", "", "require a client certificate naming this DNS name, IP, URI or email (env GRPC_CLIENT_TLS_SAN)")
	fs.StringVar(&o.redisURL, "redis-url", "", "Redis: redis://, rediss://, redis+sentinel:// or redis+cluster:// URL (env REDIS_URL with REDIS_TYPE, REDIS_SOCKET_TYPE, REDIS_AUTH, REDIS_TLS; default "+defaultRedisURL+")")
	fs.StringVar(&o.configDir, "config-dir", "", "folder of envoyproxy/ratelimit configuration files (default RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY, "+erlconfig.RuntimeDir(defaultRuntimeRoot, "", "")+")")
	addAdminFlags(fs, &o.admin)
	fs.StringVar(&o.namespace, "namespace", erlconfig.DefaultNamespace, "namespace of the Redis keys: every instance sharing a Redis must use the same one")
	fs.StringVar(&o.failureMode, "failure-mode", string(config.FailOpen), "what a domain decides while Redis does not answer, unless its file sets sluice.failureMode: Open (admit), Closed (refuse: OVER_LIMIT) or LocalFallback (limit in this process at limit / sluice.replicas) (env SLUICE_FAILURE_MODE)")
	fs.DurationVar(&o.redisTimeout, "redis-timeout", erlconfig.DefaultTimeout, "how long a call waits for Redis before the failure mode decides, 1ms to 1s, unless the domain's file sets sluice.timeout (env SLUICE_REDIS_TIMEOUT)")
	fs.BoolVar(&o.mergeDomains, "merge-domains", false, "let several files describe one domain (env MERGE_DOMAIN_CONFIG)")
	fs.BoolVar(&o.ignoreDotFiles, "ignore-dot-files", false, "skip files whose name starts with '.' (env RUNTIME_IGNOREDOTFILES)")
	addHeaderFlags(fs, &o.headers)
	addBoundFlags(fs, &o.bounds)
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 25*time.Second, "how long calls in flight may finish after SIGTERM")
	fs.StringVar(logLevel, "log-level", "info", "debug, info, warn or error (env LOG_LEVEL)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.BoolVarP(&o.help, "help", "h", false, "print this help and exit")
	return fs
}

// parseFlags reads args, then envoyproxy/ratelimit's environment for
// every flag not given (the command line wins).
func parseFlags(args []string, lookupEnv func(string) (string, bool)) (*options, *pflag.FlagSet, error) {
	o := &options{}
	var logLevel string
	fs := newFlagSet(o, &logLevel)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return nil, fs, fmt.Errorf("%w: %w", program.ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("%w: unexpected argument %q: every option is a --flag", program.ErrUsage, fs.Arg(0))
	}
	if o.help || o.version {
		return o, fs, nil
	}
	env := func(name string) string {
		v, _ := lookupEnv(name)
		return strings.TrimSpace(v)
	}
	if err := fromEnv(fs, o, &logLevel, env); err != nil {
		return nil, fs, fmt.Errorf("%w: %w", program.ErrUsage, err)
	}
	if err := o.validate(logLevel); err != nil {
		return nil, fs, fmt.Errorf("%w: %w", program.ErrUsage, err)
	}
	return o, fs, nil
}

// fromEnv fills the flags not given from envoyproxy/ratelimit's variables.
func fromEnv(fs *pflag.FlagSet, o *options, logLevel *string, env func(string) string) error {
	addr := func(flag, hostVar, portVar string, dst *string) {
		host, port := env(hostVar), env(portVar)
		if fs.Changed(flag) || (host == "" && port == "") {
			return
		}
		h, p, _ := net.SplitHostPort(*dst)
		if host != "" {
			h = host
		}
		if port != "" {
			p = port
		}
		*dst = net.JoinHostPort(h, p)
	}
	addr("listen", "GRPC_HOST", "GRPC_PORT", &o.listen)
	addr("http-listen", "HOST", "PORT", &o.httpListen)
	addr("admin-listen", "DEBUG_HOST", "DEBUG_PORT", &o.adminListen)
	if !fs.Changed("redis-url") {
		u, err := redisURLFromEnv(env)
		if err != nil {
			return err
		}
		o.redisURL = u
	}
	if err := adminFromEnv(fs, &o.admin, env); err != nil {
		return err
	}
	if !fs.Changed("config-dir") && (o.admin.policyConfig == "" || runtimeEnvSet(env)) {
		root := env("RUNTIME_ROOT")
		if root == "" {
			root = defaultRuntimeRoot
		}
		o.configDir = erlconfig.RuntimeDir(root, env("RUNTIME_SUBDIRECTORY"), env("RUNTIME_APPDIRECTORY"))
	}
	for _, b := range []struct {
		flag, name string
		dst        *bool
	}{{"merge-domains", "MERGE_DOMAIN_CONFIG", &o.mergeDomains}, {"ignore-dot-files", "RUNTIME_IGNOREDOTFILES", &o.ignoreDotFiles}} {
		if v := env(b.name); v != "" && !fs.Changed(b.flag) {
			if err := fs.Set(b.flag, v); err != nil {
				return fmt.Errorf("%s=%q: %w", b.name, v, err)
			}
		}
	}
	if err := headersFromEnv(fs, &o.headers, env); err != nil {
		return err
	}
	if err := tlsFromEnv(fs, env); err != nil {
		return err
	}
	if err := boundsFromEnv(fs, &o.bounds, env); err != nil {
		return err
	}
	// envoyproxy/ratelimit has no failure mode, and its REDIS_TIMEOUT
	// bounds connections, not decisions: Sluice's own variables.
	if v := env("SLUICE_FAILURE_MODE"); v != "" && !fs.Changed("failure-mode") {
		o.failureMode = v
	}
	if v := env("SLUICE_REDIS_TIMEOUT"); v != "" && !fs.Changed("redis-timeout") {
		if err := fs.Set("redis-timeout", v); err != nil {
			return fmt.Errorf("SLUICE_REDIS_TIMEOUT=%q: %w", v, err)
		}
	}
	if v := env("LOG_LEVEL"); v != "" && !fs.Changed("log-level") {
		*logLevel = strings.ToLower(v)
	}
	return nil
}

// tlsFromEnv reads envoyproxy/ratelimit's gRPC TLS variables, which apply
// when GRPC_SERVER_USE_TLS is true, for every TLS flag not given.
func tlsFromEnv(fs *pflag.FlagSet, env func(string) string) error {
	use := env("GRPC_SERVER_USE_TLS")
	if use == "" {
		return nil
	}
	on, err := strconv.ParseBool(use)
	if err != nil {
		return fmt.Errorf("GRPC_SERVER_USE_TLS=%q is not true or false", use)
	}
	if !on {
		return nil
	}
	if env("GRPC_SERVER_TLS_CERT") == "" && !fs.Changed("tls-cert-file") {
		return errors.New("GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY")
	}
	for _, v := range []struct{ flag, name string }{
		{"tls-cert-file", "GRPC_SERVER_TLS_CERT"}, {"tls-key-file", "GRPC_SERVER_TLS_KEY"},
		{"tls-client-ca-file", "GRPC_CLIENT_TLS_CACERT"}, {"tls-client-san", "GRPC_CLIENT_TLS_SAN"},
	} {
		if val := env(v.name); val != "" && !fs.Changed(v.flag) {
			_ = fs.Set(v.flag, val)
		}
	}
	return nil
}

// redisURLFromEnv is the URL envoyproxy/ratelimit's variables describe:
// REDIS_URL is host:port (or, for REDIS_TYPE sentinel, the master name
// then the sentinels; for cluster, the nodes, comma-separated), unless it
// is already a URL.
func redisURLFromEnv(env func(string) string) (string, error) {
	raw := env("REDIS_URL")
	if raw == "" {
		return defaultRedisURL, nil
	}
	if strings.Contains(raw, "://") {
		return raw, nil
	}
	if st := strings.ToLower(env("REDIS_SOCKET_TYPE")); st != "" && st != "tcp" {
		return "", fmt.Errorf("REDIS_SOCKET_TYPE=%s: only tcp is supported: set REDIS_SOCKET_TYPE=tcp and REDIS_URL=host:port", st)
	}
	scheme := "redis"
	if tls := strings.ToLower(env("REDIS_TLS")); tls == "true" || tls == "1" {
		scheme = "rediss"
	}
	u := &url.URL{Scheme: scheme}
	if auth := env("REDIS_AUTH"); auth != "" {
		if user, pass, ok := strings.Cut(auth, ":"); ok {
			u.User = url.UserPassword(user, pass)
		} else {
			u.User = url.UserPassword("", auth)
		}
	}
	parts := strings.Split(raw, ",")
	q := url.Values{}
	switch t := strings.ToLower(env("REDIS_TYPE")); t {
	case "", "single":
		if len(parts) != 1 {
			return "", fmt.Errorf("REDIS_URL=%q: a single Redis is one host:port", raw)
		}
		u.Host = raw
	case "sentinel":
		if len(parts) < 2 {
			return "", fmt.Errorf("REDIS_URL=%q: REDIS_TYPE=sentinel takes the master name, then the sentinels' host:port", raw)
		}
		u.Scheme += "+sentinel"
		q.Set("master_name", parts[0])
		u.Host = parts[1]
		for _, a := range parts[2:] {
			q.Add("addr", a)
		}
	case "cluster":
		u.Scheme += "+cluster"
		u.Host = parts[0]
		for _, a := range parts[1:] {
			q.Add("addr", a)
		}
	default:
		return "", fmt.Errorf("REDIS_TYPE=%s is not one of single, sentinel, cluster", t)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func (o *options) validate(logLevel string) error {
	switch {
	case o.listen == "" || o.adminListen == "":
		return errors.New("--listen and --admin-listen must not be empty")
	case o.listen == o.adminListen || (o.httpListen != "" && (o.listen == o.httpListen || o.adminListen == o.httpListen)):
		return fmt.Errorf("--listen %s, --http-listen %s and --admin-listen %s must differ", o.listen, o.httpListen, o.adminListen)
	case o.configDir == "" && o.admin.policyConfig == "":
		return errors.New("one of --config-dir and --policy-config is required")
	case o.namespace == "" || strings.ContainsAny(o.namespace, "{}/"):
		return fmt.Errorf("--namespace %q must be non-empty without '{', '}' or '/'", o.namespace)
	case o.shutdownTimeout < 0:
		return errors.New("--shutdown-timeout must not be negative")
	case o.redisTimeout < time.Millisecond || o.redisTimeout > time.Second:
		return fmt.Errorf("--redis-timeout %s must be between 1ms and 1s", o.redisTimeout)
	case !slices.Contains(config.FailureModes, config.FailureMode(o.failureMode)):
		return fmt.Errorf("--failure-mode %q is not one of %s", o.failureMode, strings.ReplaceAll(strings.Trim(fmt.Sprint(config.FailureModes), "[]"), " ", ", "))
	}
	if err := o.headers.validate(); err != nil {
		return err
	}
	if err := o.tls.validate(); err != nil {
		return err
	}
	if err := validateBounds(&o.bounds); err != nil {
		return err
	}
	// Parse the URL now (no connection is made), so a typo is a command
	// line error.
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

func usage(fs *pflag.FlagSet) string {
	return `sluice-ratelimit: Envoy's rate limit service (envoy.service.ratelimit.v3), a
drop-in for envoyproxy/ratelimit: it reads the same configuration files and
environment, and decides with Sluice's limiter in Redis.

Usage:
  sluice-ratelimit [--config-dir DIR] [--policy-config FILE] [--redis-url URL] [flags]

Flags (a flag not given is read from envoyproxy/ratelimit's environment
variable named with it; the command line wins):
` + fs.FlagUsages() + `
The folder is watched: a changed file is loaded without dropping calls, and
a file that does not load keeps the last good configuration (logged, and
counted in sluice_ratelimit_config_reload_errors_total). So is the
--policy-config file (a ConfigMap's symlink swap included); a domain that
both define is refused the same way. GET /status on the admin address is
the enforcer's status document (docs/ratelimit-admin.md).

A call past a --max-* bound is refused with INVALID_ARGUMENT before any
descriptor is decided (counted in sluice_ratelimit_oversized_calls_total).
Calls of more than 16 limited descriptors share one budget of
--max-descriptors descriptors in Redis; one that waits for its share past
its deadline or a second is refused with RESOURCE_EXHAUSTED.

Exit status: 0 after a clean shutdown, 1 on a runtime failure, 2 on a
command line error, 3 when the configuration cannot be loaded at start.
`
}
