package limiter

import (
	"github.com/sluice-dev/sluice/enforcer/config"

	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRedisDecision measures one decision per algorithm against the
// package's local Redis, at 1, 16 and 64 concurrent callers. Each caller
// is its own tenant with a limit it never reaches, so every decision runs
// the whole script and commits. docs/performance-redis.md records the figures.
func BenchmarkRedisDecision(b *testing.B) {
	windows := map[Algorithm][]Window{
		TokenBucket:          {{Requests: 1 << 40, Period: time.Minute}},
		SlidingWindowLog:     {{Requests: 1 << 40, Period: time.Second}},
		SlidingWindowCounter: {{Requests: 1 << 40, Period: time.Minute}},
		FixedWindow:          {{Requests: 1 << 40, Period: time.Minute}},
		GCRA:                 {{Requests: 1 << 40, Period: time.Minute}},
	}
	for _, a := range config.Algorithms {
		for _, concurrency := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/c%d", a, concurrency), func(b *testing.B) {
				r := newRedis(b, standalone.URL())
				var tenants atomic.Int64
				b.SetParallelism(max(1, concurrency/runtime.GOMAXPROCS(0)))
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					req := Request{Algorithm: a, Cost: 1, Windows: windows[a], Bucket: Bucket{
						Namespace: "bench", Policy: "p", Rule: "r",
						Tenant: HashTenant("salt", strconv.FormatInt(tenants.Add(1), 10))}}
					for pb.Next() {
						if _, err := r.Allow(context.Background(), req); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
			})
		}
	}
}

func BenchmarkHashTenant(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		HashTenant("policy-uid", "sk_live_0123456789abcdef")
	}
}

// BenchmarkKeyMemory reports what one bucket costs in Redis (MEMORY USAGE of
// its key) for each algorithm; the sliding log after n recorded requests.
func BenchmarkKeyMemory(b *testing.B) {
	cases := []struct {
		name    string
		a       Algorithm
		entries int64
	}{
		{"TokenBucket", TokenBucket, 1},
		{"FixedWindow", FixedWindow, 1},
		{"SlidingWindowCounter", SlidingWindowCounter, 1},
		{"GCRA", GCRA, 1},
		{"SlidingWindowLog/100", SlidingWindowLog, 100},
		{"SlidingWindowLog/1000", SlidingWindowLog, 1000},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r := newRedis(b, standalone.URL())
			ctx := context.Background()
			var bytes int64
			for i := 0; b.Loop(); i++ {
				req := Request{Algorithm: c.a, Cost: c.entries, Windows: []Window{{Requests: 100000, Period: time.Hour}},
					Bucket: Bucket{Namespace: "shop", Policy: "public-api", Rule: "api",
						Tenant: HashTenant("salt", fmt.Sprintf("%s-%d", b.Name(), i))}}
				if _, err := r.Allow(ctx, req); err != nil {
					b.Fatal(err)
				}
				n, err := r.client.MemoryUsage(ctx, req.Bucket.Key(c.a, time.Hour)).Result()
				if err != nil {
					b.Fatal(err)
				}
				bytes = n
			}
			b.ReportMetric(float64(bytes), "bytes/key")
		})
	}
}

// BenchmarkGuardDecision measures a whole Guard decision, as the proxy
// asks for it, with leasing Auto and Off: one hot tenant shared by 64
// callers (decided mostly from leases), and 10,000 tenants in turn (each
// seen too rarely to lease: one Redis call per decision either way). It
// reports the Redis calls per decision next to the rate.
func BenchmarkGuardDecision(b *testing.B) {
	for _, traffic := range []string{"hot", "cold"} {
		for _, leasing := range []config.Leasing{config.LeasingAuto, config.LeasingOff} {
			b.Run(fmt.Sprintf("%s/%s", traffic, leasing), func(b *testing.B) {
				g := NewGuard(newRedis(b, standalone.URL()))
				defer g.Close()
				policy := fmt.Sprintf("p%d", time.Now().UnixNano())
				rule, err := newRule(Bucket{Namespace: "bench", Policy: policy, Rule: "r"}, TokenBucket,
					[]Window{{Requests: 1 << 40, Period: time.Second}}, 1, FailurePolicy{Mode: config.FailClosed, Timeout: time.Second}, withLeasing(leasing))
				if err != nil {
					b.Fatal(err)
				}
				tenants := 1
				if traffic == "cold" {
					tenants = 10_000
				}
				reqs := make([]Request, tenants)
				for i := range reqs {
					reqs[i] = rule.Request(HashTenant("salt", fmt.Sprint(policy, i)))
				}
				var next atomic.Int64
				b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					var out []Admission
					for pb.Next() {
						req := reqs[int(next.Add(1))%len(reqs)]
						out = g.Decide(context.Background(), []Request{req}, out)
						if out[0].Err != nil || !out[0].Decision.Allowed {
							b.Errorf("%+v", out[0])
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
				b.ReportMetric(float64(g.LeaseCounts(policy).RedisCalls.Load())/float64(b.N), "redis-calls/decision")
			})
		}
	}
}

// BenchmarkGuardCachedRefusal measures a refusal the guard answers from
// its cache, without Redis, as 64 callers ask for it: a tenant the denial
// cache refuses, and a banned one.
func BenchmarkGuardCachedRefusal(b *testing.B) {
	for _, kind := range []string{"denial", "ban"} {
		b.Run(kind, func(b *testing.B) {
			g := NewGuard(newRedis(b, standalone.URL()))
			defer g.Close()
			policy := fmt.Sprintf("p%d", time.Now().UnixNano())
			var opts []ruleOption
			if kind == "ban" {
				opts = append(opts, withBan(&banSpec{Denials: 1, Within: time.Minute, Durations: []time.Duration{time.Hour}, ForgetAfter: time.Hour}))
			}
			rule, err := newRule(Bucket{Namespace: "bench", Policy: policy, Rule: "r"}, TokenBucket,
				[]Window{{Requests: 1, Period: time.Hour}}, 1, FailurePolicy{Mode: config.FailClosed, Timeout: time.Second}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			req := rule.Request(HashTenant("salt", policy))
			for range 3 { // admitted, then refused: cached from then on
				g.Decide(context.Background(), []Request{req}, nil)
			}
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			b.ResetTimer()
			// The cache asks Redis again at its entry's recheck time, so a
			// slow run sees a few answers that are not local: they are
			// reported, not failed.
			var remote atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				var out []Admission
				for pb.Next() {
					out = g.Decide(context.Background(), []Request{req}, out)
					if out[0].Err != nil || out[0].Decision.Allowed {
						b.Errorf("%+v", out[0])
						return
					}
					if !out[0].Decision.Local {
						remote.Add(1)
					}
				}
			})
			b.ReportMetric(float64(g.LeaseCounts(policy).RedisCalls.Load())/float64(b.N), "redis-calls/decision")
			b.ReportMetric(float64(remote.Load())/float64(b.N), "remote/decision")
		})
	}
}
