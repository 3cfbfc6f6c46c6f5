package rls

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// BenchmarkMaximalCall is the latency of the largest call the default
// bounds admit: 256 descriptors of users never seen before, each a Redis
// script call. redis-cpu-ms/op is the Redis server's CPU time per call.
func BenchmarkMaximalCall(b *testing.B) {
	domain := fmt.Sprintf("bench-max-%d", time.Now().UnixNano())
	in := serve(b, "domain: "+domain+"\ndescriptors: [{key: user, rate_limit: {unit: minute, requests_per_unit: 100}}]")
	cpu := redisCPU(b)
	n := 0
	for b.Loop() {
		n++
		in.mustCall(b, domain, users(DefaultBounds.Descriptors, fmt.Sprintf("%d-", n)))
	}
	b.ReportMetric(float64(redisCPU(b)-cpu)/float64(time.Millisecond)/float64(n), "redis-cpu-ms/op")
}

func redisCPU(b *testing.B) time.Duration {
	d, err := redisServer.CPUTime()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkOneDescriptorBesideLargeCalls is the latency of a one-descriptor
// call of a new user, alone and while other callers send large calls in a
// closed loop: the largest the default bounds admit, or, with the bounds
// lifted, 60,000 descriptors. p50-ms and p99-ms are its percentiles, and
// failure-mode-% the share of its calls that Redis did not decide within
// the default timeout of 50ms (the Open failure mode admitted them).
func BenchmarkOneDescriptorBesideLargeCalls(b *testing.B) {
	for _, c := range []struct {
		name             string
		callers, entries int
	}{
		{"alone", 0, 0},
		{"beside 1 caller of 256", 1, 256},
		{"beside 4 callers of 256", 4, 256},
		{"beside 1 caller of 60000, unbounded", 1, 60_000},
	} {
		b.Run(c.name, func(b *testing.B) {
			domain := fmt.Sprintf("bench-beside-%d", time.Now().UnixNano())
			in := serve(b, "domain: "+domain+"\nsluice: {failureMode: Open, timeout: 50ms}\ndescriptors: [{key: user, rate_limit: {unit: minute, requests_per_unit: 100}}]")
			if c.entries > DefaultBounds.Descriptors {
				if err := in.svc.SetBounds(Bounds{Descriptors: c.entries, Entries: 32, EntryBytes: 8 << 10, CallBytes: 16 << 20}); err != nil {
					b.Fatal(err)
				}
			}
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for i := range c.callers {
				wg.Go(func() {
					for k := 0; ctx.Err() == nil; k++ {
						ds := users(c.entries, fmt.Sprintf("big%d-%d-", i, k))
						_, _ = in.client.ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{Domain: domain, Descriptors: ds})
					}
				})
			}
			time.Sleep(100 * time.Millisecond)
			var took []time.Duration
			n, failed := 0, 0
			for b.Loop() {
				n++
				start := time.Now()
				resp := in.mustCall(b, domain, []*ratelimitv3common.RateLimitDescriptor{descriptor("user", fmt.Sprintf("small-%d", n))})
				took = append(took, time.Since(start))
				// a new user's first hit leaves 99; the failure mode reports 100
				if resp.Statuses[0].LimitRemaining == 100 {
					failed++
				}
			}
			stop()
			wg.Wait()
			slices.Sort(took)
			ms := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))]) / float64(time.Millisecond) }
			b.ReportMetric(ms(0.5), "p50-ms")
			b.ReportMetric(ms(0.99), "p99-ms")
			b.ReportMetric(100*float64(failed)/float64(n), "failure-mode-%")
		})
	}
}

func (in *instance) mustCall(b *testing.B, domain string, ds []*ratelimitv3common.RateLimitDescriptor) *ratelimitv3.RateLimitResponse {
	resp, err := in.client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: domain, Descriptors: ds})
	if err != nil {
		b.Fatal(err)
	}
	return resp
}
