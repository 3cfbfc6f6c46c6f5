package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// With one tenant per goroutine, a tenant's next request takes over the
// slot its previous one gave back before the give-back is sent (a slot of
// this enforcer's, still counted in Redis); with 10,000 tenants in turn,
// every request takes and gives back in Redis.
//
// BenchmarkConcurrencyBesideTokenBucket measures the allow path of a
// Concurrency rule beside a plain token bucket, in one run: route, the
// decision (one Redis round trip for the take), holding the slot, an
// in-process application, and giving the slot back (sent off the request
// path, batched). Each goroutine is a tenant of its own under limits never
// reached. Redis script calls per request, and Redis' CPU for them, come
// from Redis' own count (INFO commandstats), give-backs and renewals
// included; docs/performance-redis.md records the figures.
func BenchmarkConcurrencyBesideTokenBucket(b *testing.B) {
	tokenBucket := ruleJSON("rate", "{}", "TokenBucket", "1099511627776/1h")
	tokenBucketOff := strings.Replace(ruleJSON("rate", "{}", "TokenBucket", "1099511627776/1h"), `"cost": 1`, `"cost": 1, "leasing": "Off"`, 1)
	concurrency := `{"name": "workers", "match": {}, "algorithm": "Concurrency", "cost": 1,
  "identity": {"sources": [{"header": {"name": "X-Tenant"}}, {"shared": {}}]}, "limits": [{"concurrent": 1000000}]}`
	for _, c := range []struct {
		name, rules string
		rotate      bool
	}{
		{"TokenBucket", tokenBucket, false},
		{"TokenBucket-leasing-Off", tokenBucketOff, false},
		{"Concurrency", concurrency, false},
		{"TokenBucket+Concurrency", tokenBucket + ", " + concurrency, false},
		{"TokenBucket-leasing-Off/10000-tenants", tokenBucketOff, true},
		{"Concurrency/10000-tenants", concurrency, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := configOf(b, policyJSON("api", "Enforce", "Open", "Both", c.rules))
			target, _ := url.Parse("http://127.0.0.1:1")
			rec := &degradedCount{}
			h := New(Options{Upstream: target, Recorder: rec})
			h.upstream = noContent{}
			backends := engine.NewBackends(redisURL, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
			snap, err := engine.NewSnapshot(cfg, backends)
			if err != nil {
				b.Fatal(err)
			}
			if err := h.Swap(snap); err != nil {
				b.Fatal(err)
			}
			calls, usec := redisScripts(b)
			if c.rotate {
				serveRotating(b, h, http.StatusNoContent)
			} else {
				serveParallel(b, h, http.StatusNoContent)
			}
			// the give-backs still queued are sent by the guards' Close
			backends.Close()
			callsAfter, usecAfter := redisScripts(b)
			b.ReportMetric(float64(callsAfter-calls)/float64(b.N), "redis-calls/req")
			b.ReportMetric(float64(usecAfter-usec)/float64(b.N), "redis-µs/req")
			if n := rec.n.Load(); n > 0 {
				b.Logf("%d decisions made by the failure mode", n)
			}
		})
	}
}

// redisScripts is how many script calls (EVALSHA, EVAL) the benchmark's
// Redis has run, and the CPU they took in µs, from INFO commandstats.
func redisScripts(b *testing.B) (calls, usec int64) {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		b.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		_, stats, _ := strings.Cut(line, ":")
		for field := range strings.SplitSeq(stats, ",") {
			k, v, _ := strings.Cut(field, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls += n
			case "usec":
				usec += n
			}
		}
	}
	return calls, usec
}

// serveRotating is serveParallel with each request a tenant of 10,000 in
// turn, so that no tenant's request follows its previous one closely.
func serveRotating(b *testing.B, h *Handler, want int) {
	var next atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("GET", "/v1/orders", nil)
		w := &discardWriter{header: http.Header{}}
		for pb.Next() {
			req.Header.Set("X-Tenant", strconv.FormatInt(next.Add(1)%10000, 10))
			clear(w.header)
			h.ServeHTTP(w, req)
			if w.status != want {
				b.Errorf("status %d", w.status)
				return
			}
		}
	})
	b.StopTimer()
}
