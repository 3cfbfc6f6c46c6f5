package limiter

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// leasingRule is a checked rule of algorithm a over windows, failing closed,
// for a bucket of the test's own (also when run again with -count).
func leasingRule(t *testing.T, a Algorithm, l config.Leasing, windows ...Window) Request {
	t.Helper()
	b := bucketFor(t)
	b.Tenant = HashTenant("salt", fmt.Sprint(t.Name(), time.Now().UnixNano()))
	rule, err := newRule(b, a, windows, 1, FailurePolicy{Mode: config.FailClosed, Timeout: 200 * time.Millisecond}, withLeasing(l))
	if err != nil {
		t.Fatal(err)
	}
	return rule.Request(b.Tenant)
}

// decideOnce is one Decide of req.
func decideOnce(g *Guard, req Request) Admission {
	var buf [1]Admission
	return g.Decide(context.Background(), []Request{req}, buf[:0])[0]
}

var leasingAlgorithms = []Algorithm{TokenBucket, GCRA, FixedWindow}

func TestLeaseScriptsTakeFromEveryWindowAtOnce(t *testing.T) {
	for name, url := range topologies() {
		for _, a := range config.Algorithms {
			t.Run(name+"/"+string(a), func(t *testing.T) {
				g := NewWithT(t)
				r := newRedis(t, url)
				// hours: nothing comes back during the test
				req := leasingRule(t, a, config.LeasingAuto,
					Window{Requests: 40, Period: time.Hour}, Window{Requests: 100, Period: 2 * time.Hour})
				ctx := context.Background()

				d, taken, err := r.submit(ctx, &req, 1, 100).wait(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(d.Allowed).To(BeTrue())
				if !descriptorOf(a).leases {
					g.Expect(taken).To(Equal(int64(1)), "%s takes its cost only: it does not lease", a)
					return
				}
				g.Expect(taken).To(Equal(int64(10)), "a lease takes a quarter of what every window holds")
				g.Expect(d.Remaining).To(Equal(int64(30)), "from both windows: the 40-unit one decides")

				g.Expect(r.giveBack(ctx, []Request{req}, []int64{taken}, []int64{d.CountedAt.UnixMicro()})).To(ConsistOf(BeNil()))
				d, taken, err = r.submit(ctx, &req, 1, 1).wait(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(taken).To(Equal(int64(1)), "without want more than cost, the cost")
				g.Expect(d.Remaining).To(Equal(int64(39)), "the returned units are back in both windows")

				d, taken, err = r.submit(ctx, &req, 2, 1000).wait(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(taken).To(Equal(int64(9)), "a quarter of the 39 left")
				for d.Allowed {
					d, taken, err = r.submit(ctx, &req, 1, 1).wait(ctx)
					g.Expect(err).NotTo(HaveOccurred())
				}
				g.Expect(taken).To(BeZero(), "a refusal takes nothing")
				d, taken, err = r.submit(ctx, &req, 1, 100).wait(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(d.Allowed).To(BeFalse())
				g.Expect(taken).To(BeZero())
			})
		}
	}
}

// TestFixedWindowReturnsStayInTheirWindow gives units back after their
// window ended: the next window must not take them.
func TestFixedWindowReturnsStayInTheirWindow(t *testing.T) {
	g := NewWithT(t)
	r := newRedis(t, standalone.URL())
	ctx := context.Background()
	req := leasingRule(t, FixedWindow, config.LeasingAuto, Window{Requests: 100, Period: 200 * time.Millisecond})
	d, taken, err := r.submit(ctx, &req, 1, 100).wait(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(taken).To(Equal(int64(25)))
	// into the next window, and count in it
	time.Sleep(time.Until(windowEnd(req.Windows, d.Now)) + 5*time.Millisecond)
	next, _, err := r.submit(ctx, &req, 1, 1).wait(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(next.Remaining).To(Equal(int64(99)))
	// the first window's lease comes back late
	g.Expect(r.giveBack(ctx, []Request{req}, []int64{taken - 1}, []int64{d.CountedAt.UnixMicro()})).To(ConsistOf(BeNil()))
	peek, err := r.Peek(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(peek.Remaining).To(Equal(int64(99)), "units of an ended window free nothing in the next")
}

// hammerLeases runs workers goroutines per guard deciding req until d
// passes, and returns every admitted decision's time and how many
// decisions there were.
func hammerLeases(guards []*Guard, req Request, workers int, d time.Duration) (admitted []time.Time, decisions int64) {
	admitted, decisions, _ = hammerCounting(guards, req, workers, d)
	return admitted, decisions
}

// hammerCounting is hammerLeases, also counting decisions Redis did not
// answer in time.
func hammerCounting(guards []*Guard, req Request, workers int, d time.Duration) (admitted []time.Time, decisions, failed int64) {
	var mu sync.Mutex
	var n, errs atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for _, g := range guards {
		for range workers {
			wg.Go(func() {
				var mine []time.Time
				for time.Now().Before(stop) {
					o := decideOnce(g, req)
					n.Add(1)
					if o.Err != nil {
						errs.Add(1)
					}
					if o.Err == nil && o.Decision.Allowed {
						mine = append(mine, o.Decision.Now)
					}
				}
				mu.Lock()
				admitted = append(admitted, mine...)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return admitted, n.Load(), errs.Load()
}

func redisCalls(guards ...*Guard) (calls int64) {
	for _, g := range guards {
		for _, p := range g.LeasePolicies() {
			calls += g.LeaseCounts(p).RedisCalls.Load()
		}
	}
	return calls
}

func TestLeasesNeverAdmitMoreThanTheLimit(t *testing.T) {
	windows := map[Algorithm][]Window{
		// buckets: at most burst + rate × elapsed since the start, per window
		TokenBucket: {{Requests: 400, Period: time.Second, Burst: 40}, {Requests: 900, Period: 3 * time.Second, Burst: 300}},
		GCRA:        {{Requests: 400, Period: time.Second, Burst: 40}, {Requests: 900, Period: 3 * time.Second, Burst: 300}},
		// fixed windows: at most requests per calendar window, per window
		FixedWindow: {{Requests: 200, Period: 500 * time.Millisecond}, {Requests: 700, Period: 2 * time.Second}},
	}
	for _, a := range leasingAlgorithms {
		t.Run(string(a), func(t *testing.T) {
			g := NewWithT(t)
			// two enforcers, each with its own connection, 32 clients each
			guards := []*Guard{newGuard(t, standalone.URL()), newGuard(t, standalone.URL())}
			req := leasingRule(t, a, config.LeasingAuto, windows[a]...)
			start := time.Now()
			admitted, decisions := hammerLeases(guards, req, 32, 2500*time.Millisecond)
			g.Expect(len(admitted)).To(BeNumerically(">", 500), "the test reached the limits")

			for _, w := range req.Windows {
				if a == FixedWindow {
					per := map[int64]int64{}
					for _, at := range admitted {
						per[at.UnixMicro()/w.Period.Microseconds()]++
					}
					for win, n := range per {
						g.Expect(n).To(BeNumerically("<=", w.Requests), "%s window %d admitted %d", w.Period, win, n)
					}
					continue
				}
				// cumulative: the bucket was full at start and refills at its rate
				capacity := w.capacity(a)
				sorted := slices.SortedFunc(slices.Values(admitted), time.Time.Compare)
				for i, at := range sorted {
					allowed := float64(capacity) + float64(w.Requests)*at.Sub(start).Seconds()/w.Period.Seconds()
					g.Expect(float64(i+1)).To(BeNumerically("<=", allowed+1e-6),
						"%s: %d admitted by %s after the start", w.Period, i+1, at.Sub(start))
				}
			}
			calls := redisCalls(guards...)
			t.Logf("%d decisions, %d admitted, %d Redis calls (%.3f per decision)", decisions, len(admitted), calls, float64(calls)/float64(decisions))
			// about 0.02 here, most of it the calls of a bucket refilling every
			// 2.5 ms; the bound leaves room for a slower machine
			g.Expect(float64(calls)/float64(decisions)).To(BeNumerically("<", 0.2), "a hot tenant is decided mostly locally")
		})
	}
}

func TestLeasesGoBackToRedis(t *testing.T) {
	for _, how := range []string{"close", "release"} {
		for _, a := range leasingAlgorithms {
			t.Run(how+"/"+string(a), func(t *testing.T) {
				g := NewWithT(t)
				r := newRedis(t, standalone.URL())
				guard := NewGuard(newRedis(t, standalone.URL()))
				// a thousand units a day: nothing comes back during the test
				const limit = 1_000_000
				w := Window{Requests: 1000, Period: 24 * time.Hour, Burst: limit}
				if a == FixedWindow {
					w = Window{Requests: limit, Period: 24 * time.Hour}
				}
				req := leasingRule(t, a, config.LeasingAuto, w)
				req.Failure.Timeout = time.Second // the most a policy allows
				admitted, _, failed := hammerCounting([]*Guard{guard}, req, 16, 400*time.Millisecond)
				c := guard.LeaseCounts(req.Bucket.Policy)
				g.Expect(c.Grants.Load()).To(BeNumerically(">", 0), "the hot bucket leased")
				// a lease is held right now: the traffic just stopped
				if how == "close" {
					guard.Close()
				} else {
					guard.ReturnLeases(context.Background())
					defer guard.Close()
				}
				t.Logf("admitted %d, failed %d, grants %d, leased %d, returned %d, expired %d, lost %d, failed leases %d", len(admitted), failed, c.Grants.Load(),
					c.UnitsLeased.Load(), c.UnitsReturned.Load(), c.UnitsExpired.Load(), c.UnitsLost.Load(), c.LeaseFailures.Load())
				// A decision or lease Redis took units for but answered too
				// late, on a starved machine, loses those units (under-admits):
				// then only "never more than admitted" holds.
				exact := failed == 0 && c.LeaseFailures.Load() == 0
				remaining := func() int64 {
					peek, err := r.Peek(context.Background(), req)
					g.Expect(err).NotTo(HaveOccurred())
					return peek.Remaining
				}
				if exact {
					// a lease granted while releasing goes back at the next tick
					g.Eventually(remaining).WithTimeout(time.Second).Should(Equal(int64(limit-len(admitted))),
						"what Redis has left is what was not admitted: every unused leased unit went back")
				} else {
					g.Expect(remaining()).To(BeNumerically("<=", int64(limit-len(admitted))))
				}
				g.Expect(c.UnitsLost.Load()).To(BeZero())
				g.Expect(c.UnitsReturned.Load()).To(BeNumerically(">", 0))
			})
		}
	}
}

func TestDenialCacheEndsAtRetryAfter(t *testing.T) {
	for _, a := range leasingAlgorithms {
		t.Run(string(a), func(t *testing.T) {
			g := NewWithT(t)
			guard := newGuard(t, standalone.URL())
			// 2 per 400 ms
			req := leasingRule(t, a, config.LeasingAuto, Window{Requests: 2, Period: 400 * time.Millisecond})
			var refused Decision
			for {
				o := decideOnce(guard, req)
				g.Expect(o.Err).NotTo(HaveOccurred())
				if !o.Decision.Allowed {
					refused = o.Decision
					break
				}
			}
			g.Expect(refused.Local).To(BeFalse(), "Redis gave the first refusal")
			g.Expect(refused.RetryAfter).To(BeNumerically(">", 0))
			// when Redis admits again, on its own clock (this machine's)
			at := refused.Now.Add(refused.RetryAfter)
			callsBefore := redisCalls(guard)

			var local, n int
			var next Admission
			for {
				next = decideOnce(guard, req)
				n++
				g.Expect(next.Err).NotTo(HaveOccurred())
				d := next.Decision
				if d.Allowed {
					break
				}
				g.Expect(d.Now).To(BeTemporally("<=", at.Add(time.Millisecond)), "no refusal once Redis admits again")
				if d.Local {
					local++
					g.Expect(d.Now.Add(d.RetryAfter)).To(BeTemporally("<=", at.Add(time.Millisecond)),
						"a cached refusal asks to wait no longer than Redis did")
				}
			}
			g.Expect(next.Decision.Now).To(BeTemporally(">=", at.Add(-time.Millisecond)),
				"nothing is admitted before the Retry-After Redis gave")
			g.Expect(next.Decision.Now).To(BeTemporally("<", at.Add(500*time.Millisecond)), "the cache ends at the Retry-After")
			g.Expect(local).To(BeNumerically(">", n/2), "refusals came from the cache")
			g.Expect(redisCalls(guard)-callsBefore).To(BeNumerically("<", 20), "the cache spared Redis the refused requests (%d)", n)
		})
	}
}

func TestHeldLeaseServesWhileRedisIsDown(t *testing.T) {
	g := NewWithT(t)
	server := redistest.Start(t)
	guard := newGuard(t, server.URL())
	req := leasingRule(t, TokenBucket, config.LeasingAuto, Window{Requests: 1_000_000, Period: time.Hour})
	var hung time.Time
	var local, degraded int
	for start := time.Now(); time.Since(start) < time.Second; {
		if hung.IsZero() && time.Since(start) > 300*time.Millisecond {
			server.Freeze() // Redis answers nothing from now on
			t.Cleanup(server.Thaw)
			hung = time.Now()
		}
		o := decideOnce(guard, req)
		if hung.IsZero() {
			continue
		}
		switch {
		case o.Decision.Local:
			g.Expect(o.Decision.Allowed).To(BeTrue())
			g.Expect(o.Decision.Now.Sub(hung)).To(BeNumerically("<", leaseFor+20*time.Millisecond), "a lease ends when it ends")
			local++
		case o.Err != nil:
			g.Expect(o.Decision.Degraded).To(BeTrue())
			g.Expect(o.Decision.Allowed).To(BeFalse(), "then the failure mode (Closed) decides")
			degraded++
		default:
			t.Fatalf("Redis answered while frozen: %+v", o.Decision)
		}
	}
	g.Expect(local).To(BeNumerically(">", 0), "the held lease kept serving")
	g.Expect(degraded).To(BeNumerically(">", 0))
}

func TestLeaseSizeFollowsTraffic(t *testing.T) {
	g := NewWithT(t)
	guard := newGuard(t, standalone.URL())
	coldGuard, clock := newGuardOnFakeClock(t, standalone.URL())
	big := Window{Requests: 1000000, Period: time.Minute}

	// cold: 20 tenants, each asking every 150 ms
	var cold []Request
	for i := range 20 {
		b := bucketFor(t)
		b.Tenant = HashTenant("salt", fmt.Sprint(t.Name(), "cold", i))
		b.Policy = "cold"
		rule, err := newRule(b, TokenBucket, []Window{big}, 1, FailurePolicy{Mode: config.FailOpen})
		g.Expect(err).NotTo(HaveOccurred())
		cold = append(cold, rule.Request(b.Tenant))
	}
	for range 8 {
		for _, req := range cold {
			g.Expect(decideOnce(coldGuard, req).Decision.Local).To(BeFalse())
		}
		clock.advance(150 * time.Millisecond)
	}
	c := coldGuard.LeaseCounts("cold")
	g.Expect(c.RedisCalls.Load()).To(Equal(int64(8*20)), "a cold tenant asks Redis for each request")
	g.Expect(c.Grants.Load()).To(BeZero())

	hot := leasingRule(t, TokenBucket, config.LeasingAuto, big)
	_, decisions := hammerLeases([]*Guard{guard}, hot, 8, time.Second)
	calls := guard.LeaseCounts(hot.Bucket.Policy).RedisCalls.Load()
	g.Expect(float64(calls)/float64(decisions)).To(BeNumerically("<", 0.05), "a hot tenant leases: %d calls for %d decisions", calls, decisions)

	off := leasingRule(t, TokenBucket, config.LeasingOff, big)
	off.Bucket.Policy = "off"
	_, decisions = hammerLeases([]*Guard{guard}, off, 4, 200*time.Millisecond)
	g.Expect(guard.LeaseCounts("off").RedisCalls.Load()).To(Equal(decisions), "leasing: Off asks Redis every time")
}

func TestRefundGoesIntoTheLease(t *testing.T) {
	g := NewWithT(t)
	r := newRedis(t, standalone.URL())
	guard := NewGuard(newRedis(t, standalone.URL()))
	req := leasingRule(t, TokenBucket, config.LeasingAuto, Window{Requests: 1000, Period: 24 * time.Hour, Burst: 1_000_000})
	req.Failure.Timeout = time.Second
	admitted, _, failed := hammerCounting([]*Guard{guard}, req, 8, 300*time.Millisecond)
	n := int64(len(admitted))
	// 10 requests admitted from the lease, each refunded as the proxy does
	// when another rule refused it: into the lease, which just served
	for range 10 {
		var o Admission
		for !o.Decision.Local {
			o = decideOnce(guard, req)
			if o.Err == nil && o.Decision.Allowed {
				n++
			}
		}
		g.Expect(guard.leases.refund(&req, o.Decision.CountedAt)).To(BeTrue(), "the live lease takes the refund")
		n--
	}
	guard.Close()
	peek, err := r.Peek(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	if c := guard.LeaseCounts(req.Bucket.Policy); failed > 0 || c.LeaseFailures.Load() > 0 {
		g.Expect(peek.Remaining).To(BeNumerically("<=", 1_000_000-n), "calls answered too late lose their units, never more")
		return
	}
	g.Expect(peek.Remaining).To(Equal(1_000_000-n), "the refunded units went back to Redis with the lease")
}

// TestRefundIntoALeaseOfTheSameWindowOnly refunds a fixed-window admission
// counted in the window before the lease's: the lease must not take it.
func TestRefundIntoALeaseOfTheSameWindowOnly(t *testing.T) {
	g := NewWithT(t)
	guard := newGuard(t, standalone.URL())
	req := leasingRule(t, FixedWindow, config.LeasingAuto, Window{Requests: 1_000_000, Period: time.Hour})
	req.Failure.Timeout = time.Second
	hammerLeases([]*Guard{guard}, req, 8, 300*time.Millisecond)
	var o Admission
	for !o.Decision.Local {
		o = decideOnce(guard, req)
	}
	g.Expect(guard.leases.refund(&req, o.Decision.CountedAt.Add(-time.Hour))).To(BeFalse(),
		"a unit of the previous hour goes to Redis, which frees nothing in this one")
	g.Expect(guard.leases.refund(&req, o.Decision.CountedAt)).To(BeTrue())
}

// A tenant whose steady traffic would spend its lease by time rather than
// by units (a few requests per lease's life) gets the lease renewed before
// it ends: its requests keep being admitted without waiting for Redis.
func TestSteadyTrafficNeverWaitsForALease(t *testing.T) {
	for _, a := range leasingAlgorithms {
		t.Run(string(a), func(t *testing.T) {
			g := NewWithT(t)
			guard := newGuard(t, standalone.URL())
			req := leasingRule(t, a, config.LeasingAuto, Window{Requests: 1000000, Period: time.Minute})
			tick := time.NewTicker(4 * time.Millisecond) // 250 requests a second
			defer tick.Stop()
			warm := time.Now().Add(400 * time.Millisecond)
			end := warm.Add(1500 * time.Millisecond)
			var local, redis int
			for now := range tick.C {
				if now.After(end) {
					break
				}
				o := decideOnce(guard, req)
				g.Expect(o.Err).NotTo(HaveOccurred())
				g.Expect(o.Decision.Allowed).To(BeTrue())
				if now.Before(warm) {
					continue
				}
				if o.Decision.Local {
					local++
				} else {
					redis++
				}
			}
			g.Expect(local).To(BeNumerically(">", 200))
			// A fixed window's lease ends with its window: one request
			// there may ask Redis.
			g.Expect(redis).To(BeNumerically("<=", 1), "%d of %d requests waited for Redis", redis, local+redis)
		})
	}
}
