package limiter

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

func TestGCRAExactValues(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newRedis(t, url)
			// 10/s is one unit every 100ms; the burst tolerates 3 at once.
			const interval = 100 * time.Millisecond
			req := Request{Bucket: bucketFor(t), Algorithm: GCRA, Cost: 1,
				Windows: []Window{{Requests: 10, Period: time.Second, Burst: 3}}}

			d1 := allow(t, r, req)
			g.Expect(d1.Allowed).To(BeTrue())
			g.Expect(d1.Limit).To(Equal(int64(3)), "a GCRA limit is its burst")
			g.Expect(d1.Remaining).To(Equal(int64(2)))
			g.Expect(d1.Reset).To(Equal(d1.Now.Add(interval)), "whole again one interval after its only unit")

			// each unit moves the theoretical arrival time one interval on
			d2 := allow(t, r, req)
			g.Expect(d2.Remaining).To(Equal(int64(1)))
			g.Expect(d2.Reset).To(Equal(d1.Now.Add(2 * interval)))
			d3 := allow(t, r, req)
			g.Expect(d3.Allowed).To(BeTrue())
			g.Expect(d3.Remaining).To(Equal(int64(0)))

			d4 := allow(t, r, req)
			g.Expect(d4.Allowed).To(BeFalse())
			g.Expect(d4.Remaining).To(Equal(int64(0)))
			g.Expect(d4.Reset).To(Equal(d1.Now.Add(3*interval)), "a refusal moves nothing")
			// one unit fits once the first has been paid back
			g.Expect(d4.RetryAfter).To(Equal(d1.Now.Add(interval).Sub(d4.Now)))

			// cost 2 waits one interval longer
			req.Cost = 2
			d5 := allow(t, r, req)
			g.Expect(d5.Allowed).To(BeFalse())
			g.Expect(d5.RetryAfter).To(Equal(d1.Now.Add(2 * interval).Sub(d5.Now)))

			key := req.Bucket.Key(GCRA, time.Second)
			g.Expect(key).To(HaveSuffix("}:gcra:1s"))
			g.Expect(r.client.Type(context.Background(), key).Val()).To(Equal("string"), "one timestamp per window")
			// the window is whole 3 intervals after d1: the expiry is that
			// far from the last decision at most, and from when PTTL
			// answered at least, however long a busy machine took between
			ttl := r.client.PTTL(context.Background(), key).Val()
			answered := time.Now()
			g.Expect(ttl).To(BeNumerically("<=", 3*interval-d5.Now.Sub(d1.Now)+time.Millisecond), "state lives until the window is whole")
			g.Expect(ttl).To(BeNumerically(">=", 3*interval-answered.Sub(d1.Now)-5*time.Millisecond), "state lives until the window is whole")

			// at Retry-After the request fits
			time.Sleep(d5.RetryAfter)
			d6 := allow(t, r, req)
			g.Expect(d6.Allowed).To(BeTrue(), "admitted after %s", d5.RetryAfter)
			g.Expect(d6.Reset).To(Equal(d1.Now.Add(5 * interval)))
		})
	}
}

func TestGCRARefundGivesBackTheUnits(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newRedis(t, url)
			req := Request{Bucket: bucketFor(t), Algorithm: GCRA, Cost: 2,
				Windows: []Window{{Requests: 10, Period: time.Minute}, {Requests: 100, Period: time.Hour}}}
			d1 := allow(t, r, req)
			g.Expect(d1.Remaining).To(Equal(int64(8)))
			allow(t, r, req)
			g.Expect(r.Refund(context.Background(), []Request{req}, []time.Time{d1.Now})).To(Succeed())
			d3 := allow(t, r, req)
			g.Expect(d3.Remaining).To(Equal(int64(6)), "the refunded units count no more")
			g.Expect(d3.Reset).To(Equal(d1.Now.Add(4*6*time.Second)), "the TAT went back two intervals per unit")

			// a refund never makes a window more than whole
			g.Expect(r.Refund(context.Background(), []Request{req, req, req}, []time.Time{d1.Now, d1.Now, d1.Now})).To(Succeed())
			d, err := r.Peek(context.Background(), mustCheck(t, req))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Remaining).To(Equal(int64(10)))
			g.Expect(r.client.Exists(context.Background(), req.Bucket.Key(GCRA, time.Minute)).Val()).To(BeZero(),
				"a whole window keeps no state")
		})
	}
}

func TestGCRARecoversFromScriptFlush(t *testing.T) {
	g := NewWithT(t)
	server := redistest.Start(t)
	r := newRedis(t, server.URL())
	req := Request{Bucket: bucketFor(t), Algorithm: GCRA, Cost: 1,
		Windows: []Window{{Requests: 10, Period: time.Minute}}}
	for i := range 4 {
		if i == 2 {
			g.Expect(server.Client().ScriptFlush(context.Background()).Err()).To(Succeed())
		}
		g.Expect(allow(t, r, req).Remaining).To(Equal(int64(9 - i)))
	}
	g.Expect(server.Client().ScriptFlush(context.Background()).Err()).To(Succeed())
	g.Expect(r.Refund(context.Background(), []Request{req}, []time.Time{time.Now()})).To(Succeed(), "the refund reloads the script too")
	g.Expect(allow(t, r, req).Remaining).To(Equal(int64(6)))
}

func TestConcurrentGCRANeverRunsAheadOfItsSchedule(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			const burst, rate = 10, 100 // per second
			req := Request{Bucket: bucketFor(t), Algorithm: GCRA, Cost: 1,
				Windows: []Window{{Requests: rate, Period: time.Second, Burst: burst}}}
			interval, tolerance := gcraSpacing(rate, time.Second.Microseconds(), burst)
			admitted := hammer(t, url, req, time.Second)
			g.Expect(len(admitted)).To(BeNumerically(">", 2*burst), "the limit was reached")
			// The n-th admission since the window was whole comes no earlier
			// than n intervals minus the tolerance after the first: exactly,
			// by Redis' clock, with no slack for rounding.
			for i, at := range admitted {
				g.Expect(int64(i+1)*interval).To(BeNumerically("<=", at.Sub(admitted[0]).Microseconds()+tolerance),
					"admission %d at %s", i, at)
			}
		})
	}
}

func TestLocalGCRA(t *testing.T) {
	t.Run("admits what a token bucket of the same limit admits", func(t *testing.T) {
		const ms = time.Millisecond
		// the steps of TestLocalTokenBucket: 60/min, burst 10
		steps := []localStep{
			{at: 0, cost: 0, allowed: true, remaining: 10, resetIn: 0},
			{at: 0, cost: 5, allowed: true, remaining: 5, resetIn: 5 * time.Second},
			{at: 0, cost: 5, allowed: true, remaining: 0, resetIn: 10 * time.Second},
			{at: 0, cost: 1, allowed: false, remaining: 0, resetIn: 10 * time.Second, retry: time.Second},
			{at: 500 * ms, cost: 1, allowed: false, remaining: 0, resetIn: 9500 * ms, retry: 500 * ms},
			{at: 1000 * ms, cost: 1, allowed: true, remaining: 0, resetIn: 10 * time.Second},
			{at: 1250 * ms, cost: 1, allowed: false, remaining: 0, resetIn: 9750 * ms, retry: 750 * ms},
			{at: 2500 * ms, cost: 3, allowed: false, remaining: 1, resetIn: 8500 * ms, retry: 1500 * ms},
			{at: 4000 * ms, cost: 3, allowed: true, remaining: 0, resetIn: 10 * time.Second},
			{at: time.Hour, cost: 0, allowed: true, remaining: 10, resetIn: 0},
		}
		runLocalSteps(t, GCRA, []Window{{Requests: 60, Period: time.Minute, Burst: 10}}, steps)
	})
	t.Run("the interval is rounded up to a whole microsecond", func(t *testing.T) {
		// 7/min is one every 8571428.57µs: every unit is spaced 8571429µs
		const interval = 8571429 * time.Microsecond
		steps := []localStep{
			{at: 0, cost: 7, allowed: true, remaining: 0, resetIn: 7 * interval},
			{at: 0, cost: 1, allowed: false, remaining: 0, resetIn: 7 * interval, retry: interval},
			{at: interval - time.Microsecond, cost: 1, allowed: false, remaining: 0, resetIn: 6*interval + time.Microsecond, retry: time.Microsecond},
			{at: interval, cost: 1, allowed: true, remaining: 0, resetIn: 7 * interval},
		}
		runLocalSteps(t, GCRA, []Window{{Requests: 7, Period: time.Minute}}, steps)
	})
}
