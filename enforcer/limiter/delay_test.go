package limiter

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// delayAlgorithms are the algorithms that book reservations.
var delayAlgorithms = []Algorithm{TokenBucket, GCRA}

func TestDelayBooksFutureCapacity(t *testing.T) {
	for name, url := range topologies() {
		for _, a := range delayAlgorithms {
			t.Run(name+"/"+string(a), func(t *testing.T) {
				g := NewWithT(t)
				r := newRedis(t, url)
				// 1/s is one unit a second; two at once; waits up to 3.5s. The
				// half second of slack keeps the sequence below valid however
				// slowly a busy machine runs it.
				const interval = time.Second
				req := Request{Bucket: bucketFor(t), Algorithm: a, Cost: 1, f: features{delay: 3500 * time.Millisecond},
					Windows: []Window{{Requests: 1, Period: time.Second, Burst: 2}}}
				first := allow(t, r, req)
				g.Expect(first.Allowed).To(BeTrue())
				g.Expect(first.Delay).To(BeZero(), "capacity is there: no wait")
				g.Expect(allow(t, r, req).Delay).To(BeZero())

				// the next three book the units of the next three intervals
				for k := 1; k <= 3; k++ {
					d := allow(t, r, req)
					g.Expect(d.Allowed).To(BeTrue(), "reservation %d", k)
					slot := first.Now.Add(time.Duration(k) * interval)
					g.Expect(d.Now.Add(d.Delay)).To(BeTemporally("~", slot, time.Millisecond), "reservation %d waits for its own unit", k)
					g.Expect(d.Remaining).To(BeZero(), "a delayed request leaves nothing")
					g.Expect(d.RetryAfter).To(BeZero())
				}

				// the fourth would wait 4s: refused, taking nothing
				d := allow(t, r, req)
				g.Expect(d.Allowed).To(BeFalse())
				g.Expect(d.Delay).To(BeZero())
				// a retry is booked once the wait is down to the delay
				g.Expect(d.Now.Add(d.RetryAfter)).To(BeTemporally("~", first.Now.Add(4*interval-req.f.delay), time.Millisecond))
				again := allow(t, r, req)
				g.Expect(again.Allowed).To(BeFalse(), "the refusal booked nothing")
				g.Expect(again.Now.Add(again.RetryAfter)).To(BeTemporally("~", d.Now.Add(d.RetryAfter), time.Millisecond))

				// at that time the same request is delayed, to the next free slot
				time.Sleep(again.RetryAfter + 5*time.Millisecond)
				late := allow(t, r, req)
				g.Expect(late.Allowed).To(BeTrue())
				g.Expect(late.Now.Add(late.Delay)).To(BeTemporally("~", first.Now.Add(4*interval), time.Millisecond))
				g.Expect(late.Delay).To(BeNumerically("<=", req.f.delay))
			})
		}
	}
}

func TestDelayBooksEveryWindowOrNone(t *testing.T) {
	for _, a := range delayAlgorithms {
		t.Run(string(a), func(t *testing.T) {
			g := NewWithT(t)
			r := newRedis(t, standalone.URL())
			fast := Window{Requests: 10, Period: time.Second, Burst: 1} // a unit every 100ms
			slow := Window{Requests: 60, Period: time.Minute, Burst: 1} // a unit every second
			req := Request{Bucket: bucketFor(t), Algorithm: a, Cost: 1, f: features{delay: 500 * time.Millisecond},
				Windows: []Window{fast, slow}}
			first := allow(t, r, req)
			g.Expect(first.Allowed).To(BeTrue())

			// the slow window's wait (1s) is the request's: beyond the delay
			d := allow(t, r, req)
			g.Expect(d.Allowed).To(BeFalse())
			g.Expect(d.Window).To(Equal(1))

			// the fast window booked nothing: its next unit is still the first one
			only := Request{Bucket: req.Bucket, Algorithm: a, Cost: 1, f: features{delay: 500 * time.Millisecond}, Windows: []Window{fast}}
			f := allow(t, r, only)
			g.Expect(f.Allowed).To(BeTrue())
			g.Expect(f.Now.Add(f.Delay)).To(BeTemporally("~", first.Now.Add(100*time.Millisecond), time.Millisecond))

			// with room for the slow window's wait, both book: the longest wait
			long := req
			long.f.delay = 2 * time.Second
			l := allow(t, r, long)
			g.Expect(l.Allowed).To(BeTrue())
			g.Expect(l.Now.Add(l.Delay)).To(BeTemporally("~", first.Now.Add(time.Second), time.Millisecond))
			f2 := allow(t, r, only)
			g.Expect(f2.Now.Add(f2.Delay)).To(BeTemporally("~", first.Now.Add(300*time.Millisecond), time.Millisecond),
				"the fast window's units of 100ms and 200ms are booked")
		})
	}
}

func TestDelayReservationGivenBackFreesItsSlot(t *testing.T) {
	for _, a := range delayAlgorithms {
		t.Run(string(a), func(t *testing.T) {
			g := NewWithT(t)
			guard := newGuard(t, standalone.URL())
			rule, err := newRule(Bucket{Namespace: "shop", Policy: "p", Rule: "search"}, a,
				[]Window{{Requests: 10, Period: time.Second, Burst: 1}}, 1, FailurePolicy{Timeout: time.Second}, withDelay(time.Second))
			g.Expect(err).NotTo(HaveOccurred())
			req := rule.Request(HashTenant("salt", t.Name()))
			g.Expect(req.f.lease).To(BeTrue(), "a delay rule keeps its leases for admissions now")
			decideOne := func() Decision {
				out := guard.Decide(context.Background(), []Request{req}, nil)
				g.Expect(out[0].Err).NotTo(HaveOccurred())
				return out[0].Decision
			}
			first := decideOne()
			g.Expect(first.Delay).To(BeZero())
			booked := decideOne()
			g.Expect(booked.Delay).To(BeNumerically(">", 0))
			cancelled := decideOne()
			g.Expect(cancelled.Now.Add(cancelled.Delay)).To(BeTemporally("~", first.Now.Add(200*time.Millisecond), time.Millisecond))

			// its client hung up: the slot at 200ms goes to the next request
			g.Expect(guard.refund(context.Background(), []Request{req}, []time.Time{cancelled.CountedAt})).To(Succeed())
			next := decideOne()
			g.Expect(next.Allowed).To(BeTrue())
			g.Expect(next.Now.Add(next.Delay)).To(BeTemporally("~", first.Now.Add(200*time.Millisecond), time.Millisecond))
		})
	}
}

func TestDelayDeniedCacheNeverRefusesADelayableRequest(t *testing.T) {
	g := NewWithT(t)
	guard := newGuard(t, standalone.URL())
	rule, err := newRule(Bucket{Namespace: "shop", Policy: "p", Rule: "search"}, TokenBucket,
		[]Window{{Requests: 10, Period: time.Second, Burst: 1}}, 1, FailurePolicy{Timeout: time.Second}, withDelay(200*time.Millisecond))
	g.Expect(err).NotTo(HaveOccurred())
	req := rule.Request(HashTenant("salt", t.Name()))
	var refused Decision
	for range 10 {
		out := guard.Decide(context.Background(), []Request{req}, nil)
		if d := out[0].Decision; !d.Allowed {
			refused = d
			break
		}
	}
	g.Expect(refused.RetryAfter).To(BeNumerically(">", 0), "the bucket refuses once 200ms are booked")
	g.Expect(refused.RetryAfter).To(BeNumerically("<=", 100*time.Millisecond), "a retry is booked once the wait is down to 200ms")
	time.Sleep(refused.RetryAfter + 2*time.Millisecond)
	out := guard.Decide(context.Background(), []Request{req}, nil)
	g.Expect(out[0].Decision.Allowed).To(BeTrue(), "at Retry-After the request is delayed, not refused by the cache")
	g.Expect(out[0].Decision.Delay).To(BeNumerically("<=", 200*time.Millisecond))
}

// TestDelayNeverAdmitsMoreThanTheLimit: under concurrent requests through
// two guards (two enforcers) the times requests go on (decision time plus
// wait, on Redis' clock) never put more than the burst plus the refill of
// any interval into it.
func TestDelayNeverAdmitsMoreThanTheLimit(t *testing.T) {
	for _, a := range delayAlgorithms {
		t.Run(string(a), func(t *testing.T) {
			g := NewWithT(t)
			guards := []*Guard{newGuard(t, standalone.URL()), newGuard(t, standalone.URL())}
			const requests, burst = 20, 5 // 20/s: a unit every 50ms
			rule, err := newRule(Bucket{Namespace: "shop", Policy: "p", Rule: "search"}, a,
				[]Window{{Requests: requests, Period: time.Second, Burst: burst}}, 1, FailurePolicy{Timeout: time.Second}, withDelay(300*time.Millisecond))
			g.Expect(err).NotTo(HaveOccurred())
			req := rule.Request(HashTenant("salt", t.Name()))
			var mu sync.Mutex
			var goes []time.Time
			var wg sync.WaitGroup
			stop := time.Now().Add(1500 * time.Millisecond)
			for c := range 20 {
				wg.Go(func() {
					guard := guards[c%2]
					for time.Now().Before(stop) {
						d := guard.Decide(context.Background(), []Request{req}, nil)[0].Decision
						if !d.Allowed {
							time.Sleep(5 * time.Millisecond)
							continue
						}
						g.Expect(d.Delay).To(BeNumerically("<=", 300*time.Millisecond))
						mu.Lock()
						goes = append(goes, d.Now.Add(d.Delay))
						mu.Unlock()
						time.Sleep(d.Delay)
					}
				})
			}
			wg.Wait()
			slices.SortFunc(goes, func(x, y time.Time) int { return x.Compare(y) })
			g.Expect(len(goes)).To(BeNumerically(">", burst+requests), "the run admitted more than one burst")
			// any run of n requests going on spans at least the refill of n - burst units
			for i := range goes {
				for j := i + burst; j < len(goes); j++ {
					refill := time.Duration(j-i+1-burst) * (time.Second / requests)
					g.Expect(goes[j].Sub(goes[i])).To(BeNumerically(">=", refill-time.Microsecond),
						"%d requests went on within %s", j-i+1, goes[j].Sub(goes[i]))
				}
			}
		})
	}
}

func TestDelayRuleValidation(t *testing.T) {
	b := Bucket{Namespace: "shop", Policy: "p", Rule: "search"}
	ws := []Window{{Requests: 10, Period: time.Second}}
	for _, tc := range []struct {
		name  string
		a     Algorithm
		delay time.Duration
		ok    bool
	}{
		{"token bucket", TokenBucket, 500 * time.Millisecond, true},
		{"gcra", GCRA, MaxDelay, true},
		{"sliding window log", SlidingWindowLog, 500 * time.Millisecond, false},
		{"sliding window counter", SlidingWindowCounter, 500 * time.Millisecond, false},
		{"fixed window", FixedWindow, 500 * time.Millisecond, false},
		{"too short", TokenBucket, time.Microsecond, false},
		{"too long", GCRA, MaxDelay + time.Second, false},
		{"none on a sliding window", SlidingWindowLog, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := newRule(b, tc.a, ws, 1, FailurePolicy{}, withDelay(tc.delay))
			if tc.ok {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(ErrInvalidRequest))
			}
		})
	}
}
