package limiter

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// responseRule is a rule of algorithm a, 10 per hour, whose cost the
// answer reports: it never leases.
func responseRule(t *testing.T, a Algorithm) Rule {
	t.Helper()
	rule, err := newRule(bucketFor(t), a, []Window{{Requests: 10, Period: time.Hour}}, 1,
		FailurePolicy{Mode: config.FailClosed, Timeout: 5 * time.Second},
		func(cr *config.Rule) { cr.ResponseCost = &config.ResponseCost{Header: "X-Cost"} })
	if err != nil {
		t.Fatal(err)
	}
	return rule
}

func TestChargeAfterTheAnswerTakesTheTenantIntoDebtUntilPaid(t *testing.T) {
	for name, url := range topologies() {
		for _, a := range []Algorithm{FixedWindow, SlidingWindowCounter, TokenBucket, GCRA} {
			t.Run(name+"/"+string(a), func(t *testing.T) {
				ctx := context.Background()
				g := NewGuard(newRedis(t, url))
				req := responseRule(t, a).Request(bucketFor(t).Tenant)
				if req.f.lease {
					t.Fatal("a rule whose cost the answer reports must not lease")
				}
				var buf [1]Admission
				o := g.Decide(ctx, []Request{req}, buf[:0])[0]
				if o.Err != nil || !o.Decision.Allowed {
					t.Fatalf("first request: %+v %v", o.Decision, o.Err)
				}
				// the answer reports 15: 14 more than the cost charged up front
				debt, err := g.charge(ctx, []Request{req}, []int64{14}, []time.Time{o.Decision.CountedAt})
				if err != nil {
					t.Fatal(err)
				}
				if debt[0] != 5 {
					t.Errorf("debt after charging 15 of 10: got %d, want 5", debt[0])
				}
				o = g.Decide(ctx, []Request{req}, buf[:0])[0]
				if o.Err != nil || o.Decision.Allowed || o.Decision.Remaining != 0 || o.Decision.RetryAfter <= 0 {
					t.Fatalf("request in debt: want refused with remaining 0 and a Retry-After, got %+v %v", o.Decision, o.Err)
				}
				// a debt is capped at one limit
				debt, err = g.charge(ctx, []Request{req}, []int64{1000}, []time.Time{o.Decision.Now})
				if err != nil {
					t.Fatal(err)
				}
				if debt[0] != 10 {
					t.Errorf("debt after a huge charge: got %d, want the limit, 10", debt[0])
				}
				// a peek shows the debt (what /debug/tenant does) and changes nothing
				for range 2 {
					d, err := g.redis.Peek(ctx, req)
					if err != nil || d.Debt < 9 {
						t.Fatalf("peek: %+v %v, want a debt of about 10", d, err)
					}
				}
			})
		}
	}
}

func TestChargeGivesBackWhatTheAnswerDidNotUse(t *testing.T) {
	for _, a := range []Algorithm{FixedWindow, SlidingWindowCounter, TokenBucket, GCRA} {
		t.Run(string(a), func(t *testing.T) {
			ctx := context.Background()
			g := NewGuard(newRedis(t, standalone.URL()))
			rule, err := newRule(bucketFor(t), a, []Window{{Requests: 10, Period: time.Hour}}, 4,
				FailurePolicy{Mode: config.FailClosed, Timeout: 5 * time.Second},
				func(cr *config.Rule) { cr.ResponseCost = &config.ResponseCost{JSONUsage: "total_tokens"} })
			if err != nil {
				t.Fatal(err)
			}
			req := rule.Request(bucketFor(t).Tenant)
			var buf [1]Admission
			o := g.Decide(ctx, []Request{req}, buf[:0])[0]
			if !o.Decision.Allowed || o.Decision.Remaining != 6 {
				t.Fatalf("first request of cost 4: %+v %v", o.Decision, o.Err)
			}
			// the answer reports 1: 3 given back
			if _, err := g.charge(ctx, []Request{req}, []int64{-3}, []time.Time{o.Decision.CountedAt}); err != nil {
				t.Fatal(err)
			}
			o = g.Decide(ctx, []Request{req}, buf[:0])[0]
			if !o.Decision.Allowed || o.Decision.Remaining < 5 {
				t.Fatalf("after 3 of 4 given back, a second request of 4 leaves at least 5: %+v %v", o.Decision, o.Err)
			}
		})
	}
}

func TestChargeLandsInEveryWindowOfTheRule(t *testing.T) {
	for _, a := range []Algorithm{FixedWindow, SlidingWindowCounter, TokenBucket, GCRA} {
		t.Run(string(a), func(t *testing.T) {
			ctx := context.Background()
			r := newRedis(t, standalone.URL())
			g := NewGuard(r)
			rule, err := newRule(bucketFor(t), a, []Window{{Requests: 10, Period: time.Hour}, {Requests: 100, Period: 24 * time.Hour}}, 1,
				FailurePolicy{Mode: config.FailClosed, Timeout: 5 * time.Second},
				func(cr *config.Rule) { cr.ResponseCost = &config.ResponseCost{Header: "X-Cost"} })
			if err != nil {
				t.Fatal(err)
			}
			req := rule.Request(bucketFor(t).Tenant)
			var buf [1]Admission
			o := g.Decide(ctx, []Request{req}, buf[:0])[0]
			if !o.Decision.Allowed {
				t.Fatalf("first request: %+v %v", o.Decision, o.Err)
			}
			debt, err := g.charge(ctx, []Request{req}, []int64{14}, []time.Time{o.Decision.CountedAt})
			if err != nil || debt[0] != 5 {
				t.Fatalf("charge: debt %v %v, want 5 (the hour window's)", debt, err)
			}
			day := req
			day.Windows = req.Windows[1:]
			d, err := r.Peek(ctx, day)
			if err != nil {
				t.Fatal(err)
			}
			if d.Remaining < 84 || d.Remaining > 85 {
				t.Errorf("the day window after 15 charged: remaining %d, want 85", d.Remaining)
			}
		})
	}
}

// BenchmarkGuardCharge is a decision and its settlement after the answer,
// as a responseCost rule makes them: two script calls, 64 callers on
// 10,000 tenants.
func BenchmarkGuardCharge(b *testing.B) {
	g := NewGuard(newRedis(b, standalone.URL()))
	defer g.Close()
	policy := fmt.Sprintf("p%d", time.Now().UnixNano())
	rule, err := newRule(Bucket{Namespace: "bench", Policy: policy, Rule: "r"}, TokenBucket,
		[]Window{{Requests: 1 << 40, Period: time.Second}}, 1, FailurePolicy{Mode: config.FailClosed, Timeout: time.Second},
		func(cr *config.Rule) { cr.ResponseCost = &config.ResponseCost{Header: "X-Cost"} })
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]Request, 10_000)
	for i := range reqs {
		reqs[i] = rule.Request(HashTenant("salt", fmt.Sprint(policy, i)))
	}
	var next atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var out []Admission
		for pb.Next() {
			req := reqs[int(next.Add(1))%len(reqs)]
			out = g.Decide(context.Background(), []Request{req}, out)
			if out[0].Err != nil || !out[0].Decision.Allowed {
				b.Fatal(out[0].Err)
			}
			if _, err := g.charge(context.Background(), []Request{req}, []int64{41}, []time.Time{out[0].Decision.CountedAt}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestGiveBackIsOnlyForTheWindowItWasCountedIn(t *testing.T) {
	for _, a := range []Algorithm{FixedWindow, SlidingWindowCounter} {
		t.Run(string(a), func(t *testing.T) {
			ctx := context.Background()
			g := NewGuard(newRedis(t, standalone.URL()))
			// an hour's window: the test does not cross its end but once in
			// hundreds of thousands of runs
			rule, err := newRule(bucketFor(t), a, []Window{{Requests: 10, Period: time.Hour}}, 1,
				FailurePolicy{Mode: config.FailClosed, Timeout: 5 * time.Second},
				func(cr *config.Rule) { cr.ResponseCost = &config.ResponseCost{Header: "X-Cost"} })
			if err != nil {
				t.Fatal(err)
			}
			req := rule.Request(bucketFor(t).Tenant)
			var buf [1]Admission
			o := g.Decide(ctx, []Request{req}, buf[:0])[0]
			if !o.Decision.Allowed || o.Decision.Remaining != 9 {
				t.Fatalf("first request: %+v %v", o.Decision, o.Err)
			}
			// units counted in an earlier window are not given to this one
			if _, err := g.charge(ctx, []Request{req}, []int64{-1}, []time.Time{o.Decision.CountedAt.Add(-time.Hour)}); err != nil {
				t.Fatal(err)
			}
			o = g.Decide(ctx, []Request{req}, buf[:0])[0]
			if o.Decision.Remaining != 8 {
				t.Fatalf("after a give back of an earlier window: remaining %d, want 8", o.Decision.Remaining)
			}
			if _, err := g.charge(ctx, []Request{req}, []int64{-1}, []time.Time{o.Decision.CountedAt}); err != nil {
				t.Fatal(err)
			}
			o = g.Decide(ctx, []Request{req}, buf[:0])[0]
			if o.Decision.Remaining != 8 {
				t.Fatalf("after a give back of this window: remaining %d, want 8", o.Decision.Remaining)
			}
		})
	}
}
