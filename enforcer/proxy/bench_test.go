package proxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/overload"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// BenchmarkDecide measures the request path without the network to the
// application: route, one Redis round trip, headers, metrics hooks. Each
// goroutine is a tenant of its own with a limit it never reaches, and the
// application is an in-process handler.
func BenchmarkDecide(b *testing.B) {
	for _, rules := range []int{1, 3} {
		b.Run(fmt.Sprintf("rules=%d", rules), func(b *testing.B) {
			var rs []string
			for i := range rules {
				rs = append(rs, ruleJSON(fmt.Sprint("r", i), "{}", "TokenBucket", fmt.Sprintf("%d/1h", 1<<40-i)))
			}
			cfg := configOf(b, policyJSON("api", "Enforce", "Open", "Both", rs[0]+func() string {
				var s string
				for _, r := range rs[1:] {
					s += ", " + r
				}
				return s
			}()))
			target, _ := url.Parse("http://127.0.0.1:1")
			rec := &degradedCount{}
			h := New(Options{Upstream: target, Recorder: rec})
			h.upstream = noContent{}
			backends := engine.NewBackends(redisURL, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
			defer backends.Close()
			snap, err := engine.NewSnapshot(cfg, backends)
			if err != nil {
				b.Fatal(err)
			}
			if err := h.Swap(snap); err != nil {
				b.Fatal(err)
			}
			serveParallel(b, h, http.StatusNoContent)
			if n := rec.n.Load(); n > 0 {
				b.Logf("%d of %d decisions made by the failure mode", n, b.N*rules)
			}
		})
	}
}

// noContent is an application in process: every request gets 204.
type noContent struct{}

func (noContent) Forward(w http.ResponseWriter, _ *http.Request, _ config.UpstreamProtocol) {
	w.WriteHeader(http.StatusNoContent)
}
func (noContent) CloseIdleConnections() {}

// degradedCount counts failure mode decisions, which would make the
// benchmark measure something else than Redis decisions.
type degradedCount struct {
	engine.NopRecorder
	n atomic.Int64
}

func (d *degradedCount) Degraded(*rules.Policy) { d.n.Add(1) }

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(b []byte) (int, error) { return io.Discard.Write(b) }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }

// BenchmarkForward measures the whole handler: a decision, then forwarding
// to an application on loopback over kept-alive connections (the
// application's own work is an empty 200), by the enforcer's forwarder and
// by the reverse proxy that takes the requests the forwarder does not; and
// by the forwarder with the overload bounds, whose cost is the difference.
func BenchmarkForward(b *testing.B) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer app.Close()
	target, _ := url.Parse(app.URL)
	backends := engine.NewBackends(redisURL, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
	defer backends.Close()
	snap, err := engine.NewSnapshot(configOf(b, policyJSON("api", "Enforce", "Open", "Both", ruleJSON("all", "{}", "TokenBucket", "1099511627776/1h"))), backends)
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"forwarder", "forwarder-overload", "reverse-proxy"} {
		b.Run("path="+path, func(b *testing.B) {
			rec := &degradedCount{}
			opts := Options{Upstream: target, Recorder: rec}
			if path == "reverse-proxy" {
				opts = reverseProxyOnly(opts)
			}
			if path == "forwarder-overload" {
				// The bounds every sluice-enforcer runs with.
				opts.Overload = overload.New(overload.LimitsFor(overload.SoftMemoryLimit()))
			}
			h := New(opts)
			defer h.CloseIdleConnections()
			if err := h.Swap(snap); err != nil {
				b.Fatal(err)
			}
			serveParallel(b, h, http.StatusOK)
			if n := rec.n.Load(); n > 0 {
				b.Logf("%d decisions made by the failure mode", n)
			}
		})
	}
}

// serveParallel runs GET /v1/orders through h from 8 goroutines per CPU,
// each as its own tenant, and fails on any other status than want. Besides
// the time per request it reports the process's CPU time per request
// (cpu-ns/op), which moves less with what else the machine runs.
func serveParallel(b *testing.B, h *Handler, want int) {
	var tenants atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	cpu := processCPU(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("GET", "/v1/orders", nil)
		req.Header.Set("X-Tenant", strconv.FormatInt(tenants.Add(1), 10))
		w := &discardWriter{header: http.Header{}}
		for pb.Next() {
			clear(w.header)
			h.ServeHTTP(w, req)
			if w.status != want {
				b.Errorf("status %d", w.status)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
