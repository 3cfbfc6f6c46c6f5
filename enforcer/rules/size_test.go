package rules

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// overridesConfig is a configuration of one policy whose rule has n
// per-tenant overrides, tenants of 36 characters, as bulkpolicy's.
func overridesConfig(n int) *config.Config {
	rule := config.Rule{Name: "api", Algorithm: config.TokenBucket, Cost: 1,
		Identity: config.Identity{Sources: []config.Source{{Header: &config.HeaderSource{Name: "X-Tenant-ID"}}}},
		Limits:   []config.Limit{{Requests: 60, Period: config.Duration{Duration: time.Minute}}}}
	for i := range n {
		rule.Overrides = append(rule.Overrides, config.Override{Tenant: tenant(i),
			Limits: []config.Limit{{Requests: int64(1000 + i), Period: config.Duration{Duration: time.Minute}}}})
	}
	return &config.Config{Schema: config.Schema, Namespace: "shop", Policies: []config.Policy{{
		Name: "many-overrides", UID: "u-1", Generation: 1, Replicas: 1, Selector: config.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
		UpstreamPort: 8080, Mode: config.ModeEnforce, FailureMode: config.FailOpen, Timeout: config.Duration{Duration: 50 * time.Millisecond},
		ResponseHeaders: config.HeadersBoth, Salt: "s", Rules: []config.Rule{rule}}}}
}

func tenant(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// BenchmarkOverrides is the rule table of a rule with 10 or 10,000
// overrides: building it (new), the heap it holds per override, and
// deciding a request of the last overridden tenant (check), which costs
// the same either way: an override is a map entry (docs/performance.md).
//
//	go test -bench Overrides -run '^$' -benchmem ./enforcer/rules/
func BenchmarkOverrides(b *testing.B) {
	for _, n := range []int{10, 10000} {
		cfg := overridesConfig(n)
		b.Run(fmt.Sprintf("overrides=%d/new", n), func(b *testing.B) {
			before := liveHeap()
			table, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			held := float64(int64(liveHeap())-int64(before)) / float64(n)
			runtime.KeepAlive(table)
			for b.Loop() {
				if _, err := New(cfg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(held, "heap-B/override") // after the loop, which resets reported metrics
		})
		b.Run(fmt.Sprintf("overrides=%d/check", n), func(b *testing.B) {
			table, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			req := newRequest("GET", "/v1/orders", "X-Tenant-ID: "+tenant(n-1))
			dst := table.Checks(req, nil)
			if len(dst) != 1 || dst[0].Request.Windows[0].Requests != int64(1000+n-1) {
				b.Fatalf("the last override is not applied: %+v", dst)
			}
			b.ReportAllocs()
			for b.Loop() {
				dst = table.Checks(req, dst[:0])
			}
		})
	}
}

// liveHeap is the heap that a full collection found reachable.
func liveHeap() uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}
