package reload

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// overridesConfig is a configuration of one policy whose rule has n
// per-tenant overrides, tenants of 36 characters.
func overridesConfig(b *testing.B, n int) []byte {
	rule := config.Rule{Name: "api", Algorithm: config.TokenBucket, Cost: 1,
		Identity: config.Identity{Sources: []config.Source{{Header: &config.HeaderSource{Name: "X-Tenant-ID"}}}},
		Limits:   []config.Limit{{Requests: 60, Period: config.Duration{Duration: time.Minute}}}}
	for i := range n {
		rule.Overrides = append(rule.Overrides, config.Override{Tenant: fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
			Limits: []config.Limit{{Requests: int64(1000 + i), Period: config.Duration{Duration: time.Minute}}}})
	}
	c := config.Config{Schema: config.Schema, Namespace: "shop", Policies: []config.Policy{{
		Name: "many-overrides", UID: "u-1", Generation: 1, Replicas: 1, Selector: config.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
		UpstreamPort: 8080, Mode: config.ModeEnforce, FailureMode: config.FailOpen, Timeout: config.Duration{Duration: 50 * time.Millisecond},
		ResponseHeaders: config.HeadersBoth, Salt: "s", Rules: []config.Rule{rule}}}}
	data, err := json.Marshal(c)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkReadCompressed is an enforcer's reading of its ConfigMap's
// config.json.gz: inflate, decode, validate; heap-B/override is what the
// configuration in service holds per override (its rule table's is
// enforcer/rules' BenchmarkOverrides; docs/performance.md).
//
//	go test -bench ReadCompressed -run '^$' ./enforcer/reload/
func BenchmarkReadCompressed(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("overrides=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			doc := overridesConfig(b, n)
			compressed := config.Compress(doc)
			if err := os.WriteFile(filepath.Join(dir, "config.json.gz"), compressed, 0o600); err != nil {
				b.Fatal(err)
			}
			source := &Source{ConfigPath: filepath.Join(dir, "config.json")}
			heap := retainedHeap(b, func() any {
				l, err := source.Read()
				if err != nil {
					b.Fatal(err)
				}
				return l
			})
			for b.Loop() {
				if _, err := source.Read(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(heap)/float64(n), "heap-B/override")
			b.ReportMetric(float64(len(doc)), "json-bytes")
			b.ReportMetric(float64(len(compressed)), "gzip-bytes")
		})
	}
}

// retainedHeap is how much heap what load returns holds: the live heap
// after a collection, with it and without it.
func retainedHeap(b *testing.B, load func() any) uint64 {
	before := liveHeap()
	kept := load()
	after := liveHeap()
	runtime.KeepAlive(kept)
	if after < before {
		b.Fatal("the live heap shrank while loading: measure again")
	}
	return after - before
}

// liveHeap is the heap that a full collection found reachable.
func liveHeap() uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}
