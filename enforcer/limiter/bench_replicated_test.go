package limiter

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// BenchmarkReplicatedDecision is what storage.consistency: Replicated costs
// a decision beside Async, on one primary with one replica on this
// machine: 1,000 tenants in turn (leasing Off, every decision one script
// call), one caller and 64. A Replicated decision is its script and a
// WAIT 1 on a connection of its own, answered once the replica has the
// count. docs/algorithms.md records the figures.
func BenchmarkReplicatedDecision(b *testing.B) {
	primary := redistest.Start(b)
	redistest.StartReplica(b, primary.Addr())
	g := NewGuard(newRedis(b, primary.URL()))
	b.Cleanup(g.Close)
	ctx := context.Background()
	for _, replicated := range []bool{false, true} {
		name := "Async"
		if replicated {
			name = "Replicated"
		}
		policy := fmt.Sprintf("%s%d", name, time.Now().UnixNano())
		rule, err := newRule(Bucket{Namespace: "bench", Policy: policy, Rule: "r"}, FixedWindow,
			[]Window{{Requests: 1 << 40, Period: time.Hour}}, 1,
			FailurePolicy{Mode: config.FailClosed, Timeout: time.Second, Replicas: 1, Replicated: replicated},
			withLeasing(config.LeasingOff))
		if err != nil {
			b.Fatal(err)
		}
		reqs := make([]Request, 1000)
		for i := range reqs {
			reqs[i] = rule.Request(HashTenant("salt", policy+strconv.Itoa(i)))
		}
		if o := g.Decide(ctx, reqs[:1], nil)[0]; o.Err != nil { // the script loaded
			b.Fatal(o.Err)
		}
		for _, callers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/callers%d", name, callers), func(b *testing.B) {
				var next atomic.Int64
				// AllowAll as the proxy calls it, with the rule's own
				// request: leasing Off, one script call per decision
				decide := func() {
					i := int(next.Add(1)) % len(reqs)
					if o := g.Decide(ctx, reqs[i:i+1], nil)[0]; o.Err != nil || !o.Decision.Allowed {
						b.Errorf("%+v", o)
					}
				}
				start := time.Now()
				if callers == 1 {
					for b.Loop() {
						decide()
					}
				} else {
					b.SetParallelism(callers / 2)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							decide()
						}
					})
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
			})
		}
	}
}
