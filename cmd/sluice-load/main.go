// Command sluice-load measures an HTTP or gRPC proxy on this machine: maximum
// throughput with a closed loop of keep-alive connections, or latency at a
// fixed request rate (open model), with status code counts and latency
// percentiles from a log-linear histogram. Its upstream subcommand is a
// trivial HTTP server to put behind the proxy, its proxy subcommand a bare
// net/http reverse proxy to compare the proxy with; with --grpc it calls
// shop.v1.Orders/Create of the gRPC sample application (hack/orders) in
// cleartext HTTP/2, and with --rls it calls Envoy's rate limit service
// (ShouldRateLimit) as Envoy's rate limit filter does. It only sends load to loopback addresses, and every run
// stops by itself.
//
// hack/bench-proxy.sh uses it to compare the enforcer with nginx,
// hack/bench-grpc.sh to measure gRPC through the enforcer; the results are
// in docs/performance.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// maxDuration bounds a run (warm-up included), so a mistyped flag cannot
// leave load running for hours.
const maxDuration = 10 * time.Minute

const usage = `Usage:
  sluice-load [flags] URL          send load to URL (loopback only) and report
  sluice-load upstream [flags]     serve a small 200 response, the upstream of a benchmark
  sluice-load proxy [flags]        a bare net/http reverse proxy to --upstream, the floor of a proxy benchmark

Max throughput, 64 connections in a closed loop for 10s:
  sluice-load --concurrency 64 --duration 10s http://127.0.0.1:9080/
Latency at a fixed 2,000 requests/s, ten tenants in turn:
  sluice-load --rate 2000 --duration 10s -H 'X-Tenant-ID: tenant-{tenant}' --tenants 10 http://127.0.0.1:9080/
gRPC unary calls (shop.v1.Orders/Create), 64 at a time over 4 connections:
  sluice-load --grpc --connections 4 --concurrency 64 -H 'x-tenant-id: tenant-{tenant}' http://127.0.0.1:9080
Envoy's rate limit service, 1,000 users in turn:
  sluice-load --rls ingress --descriptor 'generic_key=api,user_id=u{tenant}' --tenants 1000 http://127.0.0.1:8081

Flags:
`

// headerList is the repeatable -H flag.
type headerList []string

func (h *headerList) String() string     { return strings.Join(*h, ", ") }
func (h *headerList) Set(v string) error { *h = append(*h, v); return nil }

// loadOptions are the command line of a load run.
type loadOptions struct {
	url     string
	method  string
	headers headerList
	tenants int
	plan    plan
	json    bool
	// grpc calls the Orders sample over gRPC on connections connections.
	grpc        bool
	connections int
	// rls calls Envoy's rate limit service for this domain, with these
	// descriptors, instead.
	rls         string
	descriptors headerList
}

func parseLoadOptions(args []string, output io.Writer) (*loadOptions, error) {
	o := &loadOptions{}
	fs := flag.NewFlagSet("sluice-load", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprint(output, usage)
		fs.PrintDefaults()
	}
	fs.Float64Var(&o.plan.Rate, "rate", 0, "requests per second to send (open model); 0 sends as fast as answers come back (closed loop)")
	fs.IntVar(&o.plan.Concurrency, "concurrency", 64, "keep-alive connections: the closed loop's concurrency, the open model's most requests in flight")
	fs.DurationVar(&o.plan.Duration, "duration", 10*time.Second, "how long to measure")
	fs.DurationVar(&o.plan.Warmup, "warmup", time.Second, "how long to send load before measuring (connections, pools, caches)")
	fs.Uint64Var(&o.plan.MaxRequests, "requests", 0, "stop after this many measured requests; 0 means no limit")
	fs.DurationVar(&o.plan.Timeout, "timeout", 5*time.Second, "timeout of each request, connecting included")
	fs.StringVar(&o.method, "method", "GET", "HTTP method")
	fs.Var(&o.headers, "H", "request header `Name: value`, repeatable; {tenant} in the value becomes 0..tenants-1, in turn")
	fs.IntVar(&o.tenants, "tenants", 1, "how many tenants {tenant} rotates through")
	fs.BoolVar(&o.json, "json", false, "print the report as one JSON object")
	fs.BoolVar(&o.grpc, "grpc", false, "call shop.v1.Orders/Create (hack/orders) over gRPC, cleartext HTTP/2, instead of sending HTTP/1.1 requests; -H sets metadata")
	fs.IntVar(&o.connections, "connections", 4, "with --grpc or --rls: client connections the concurrent calls share")
	fs.StringVar(&o.rls, "rls", "", "call envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit for this `domain`, as Envoy does, instead of sending HTTP/1.1 requests; OK counts as 200, OVER_LIMIT as 429")
	fs.Var(&o.descriptors, "descriptor", "with --rls: a descriptor `key=value[,key=value...]` of each call, repeatable; {tenant} in a value becomes 0..tenants-1, in turn")
	// The URL may come before, between or after the flags.
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch {
	case len(positional) != 1:
		return nil, fmt.Errorf("want exactly one target URL, got %d arguments", len(positional))
	case o.plan.Rate < 0 || o.plan.Rate > 1e6:
		return nil, fmt.Errorf("--rate must be between 0 and 1000000, got %v", o.plan.Rate)
	case o.plan.Concurrency < 1 || o.plan.Concurrency > 10000:
		return nil, fmt.Errorf("--concurrency must be between 1 and 10000, got %d", o.plan.Concurrency)
	case o.plan.Duration <= 0 || o.plan.Warmup < 0 || o.plan.Duration+o.plan.Warmup > maxDuration:
		return nil, fmt.Errorf("--duration must be positive and --warmup not negative, %s at most together", maxDuration)
	case o.plan.Timeout <= 0:
		return nil, errors.New("--timeout must be positive")
	}
	o.url = positional[0]
	return o, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	args := os.Args[1:]
	var err error
	switch {
	case len(args) > 0 && args[0] == "upstream":
		err = runUpstream(ctx, args[1:], os.Stderr)
	case len(args) > 0 && args[0] == "proxy":
		err = runProxy(ctx, args[1:], os.Stderr)
	default:
		err = runLoad(ctx, args, os.Stdout, os.Stderr)
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "sluice-load:", err)
		os.Exit(1)
	}
}

// errNoAnswer fails a run in which no request was answered.
var errNoAnswer = errors.New("no request was answered")

func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseLoadOptions(args, stderr)
	if err != nil {
		return err
	}
	var r *report
	switch {
	case o.rls != "":
		t, err := newRLSTarget(ctx, o.url, o.rls, o.descriptors, o.tenants, o.connections, o)
		if err != nil {
			return err
		}
		defer t.close()
		r = buildReport(t.url, o.plan, runCallers(ctx, t.caller, o.plan))
	case o.grpc:
		t, err := newGRPCTarget(ctx, o.url, o.headers, o.tenants, o.connections, o.plan.Timeout)
		if err != nil {
			return err
		}
		defer t.close()
		r = buildReport(t.url, o.plan, runCallers(ctx, t.caller, o.plan))
	default:
		t, err := newTarget(ctx, o.url, o.method, o.headers, o.tenants)
		if err != nil {
			return err
		}
		r = newReport(t, o.plan, run(ctx, t, o.plan))
	}
	if o.json {
		err = r.writeJSON(stdout)
	} else {
		err = r.writeText(stdout)
	}
	if err != nil {
		return err
	}
	if r.Requests == 0 {
		if r.LastError != "" {
			return fmt.Errorf("%w: %s", errNoAnswer, r.LastError)
		}
		return errNoAnswer
	}
	return nil
}
