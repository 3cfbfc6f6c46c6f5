package limiter

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// newGuard is a Guard over a Redis limiter on url, closed when t ends.
func newGuard(t *testing.T, url string) *Guard {
	t.Helper()
	g := NewGuard(newRedis(t, url))
	t.Cleanup(g.Close)
	return g
}

func requestWith(t *testing.T, mode config.FailureMode) Request {
	return Request{Bucket: bucketFor(t), Algorithm: SlidingWindowLog, Cost: 1,
		Windows: []Window{{Requests: 10, Period: time.Minute}},
		Failure: FailurePolicy{Mode: mode, Timeout: 50 * time.Millisecond, Replicas: 2}}
}

func TestGuardFailureModesWhenRedisStops(t *testing.T) {
	server := redistest.Start(t)
	guard := newGuard(t, server.URL())

	type outcome struct {
		allowed, denied int
	}
	decideN := func(t *testing.T, req Request, n int) (outcome, []error) {
		var o outcome
		var errs []error
		for range n {
			start := time.Now()
			d, err := guard.Allow(context.Background(), req)
			NewWithT(t).Expect(time.Since(start)).To(BeNumerically("<", req.Failure.Timeout+250*time.Millisecond),
				"a decision never waits much longer than the policy's timeout")
			if err != nil {
				NewWithT(t).Expect(d.Degraded).To(BeTrue())
				errs = append(errs, err)
			}
			if d.Allowed {
				o.allowed++
			} else {
				o.denied++
			}
		}
		return o, errs
	}

	for _, mode := range []config.FailureMode{config.FailOpen, config.FailClosed, config.FailLocal} {
		o, errs := decideN(t, requestWith(t, mode), 1)
		NewWithT(t).Expect(errs).To(BeEmpty(), "Redis is up for %s", mode)
		NewWithT(t).Expect(o.allowed).To(Equal(1))
	}

	server.Stop()
	cases := []struct {
		mode config.FailureMode
		want outcome
	}{
		{config.FailOpen, outcome{allowed: 12}},
		{config.FailClosed, outcome{denied: 12}},
		// 10/min shared by 2 replicas: this one enforces 5 on its own
		{config.FailLocal, outcome{allowed: 5, denied: 7}},
	}
	for _, c := range cases {
		t.Run(string(c.mode), func(t *testing.T) {
			g := NewWithT(t)
			o, errs := decideN(t, requestWith(t, c.mode), 12)
			g.Expect(o).To(Equal(c.want))
			g.Expect(errs).To(HaveLen(12), "every decision reports why Redis was not used")
		})
	}
	t.Run("Closed asks clients to retry later", func(t *testing.T) {
		d, err := guard.Allow(context.Background(), requestWith(t, config.FailClosed))
		NewWithT(t).Expect(err).To(HaveOccurred())
		NewWithT(t).Expect(d.RetryAfter).To(Equal(time.Second))
	})
	t.Run("health says Redis is unreachable", func(t *testing.T) {
		h := guard.Health()
		NewWithT(t).Expect(h.Reachable).To(BeFalse())
		NewWithT(t).Expect(h.LastError).To(ContainSubstring("connection refused"))
	})

	// Back with no scripts loaded and no keys: decisions resume unaided.
	NewWithT(t).Expect(server.Restart()).To(Succeed())
	req := requestWith(t, config.FailClosed)
	calls := 0
	NewWithT(t).Eventually(func() error {
		calls++
		_, err := guard.Allow(context.Background(), req)
		return err
	}).WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	d, err := guard.Allow(context.Background(), req)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(d.Degraded).To(BeFalse())
	// A call that timed out on a busy machine may have been counted too:
	// never more than once per call, and from scratch.
	NewWithT(t).Expect(d.Remaining).To(BeNumerically("<=", 8), "the restarted Redis counts the calls that succeeded")
	NewWithT(t).Expect(d.Remaining).To(BeNumerically(">=", 10-(calls+1)), "the restarted Redis counts from scratch, at most once per call")
	NewWithT(t).Expect(guard.Health().Reachable).To(BeTrue())
}

func TestGuardHungRedisAnswersWithinTimeout(t *testing.T) {
	g := NewWithT(t)
	server := redistest.Start(t)
	guard := newGuard(t, server.URL())
	req := requestWith(t, config.FailOpen)
	_, err := guard.Allow(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())

	server.Freeze()
	defer server.Thaw()
	// Timeouts go on until they have lasted tripWindow; from then on the
	// guard stops waiting on Redis for a while.
	var skipped int
	for range 20 {
		start := time.Now()
		d, err := guard.Allow(context.Background(), req)
		g.Expect(time.Since(start)).To(BeNumerically("<", req.Failure.Timeout+250*time.Millisecond))
		g.Expect(d.Allowed).To(BeTrue())
		g.Expect(d.Degraded).To(BeTrue())
		if errors.Is(err, ErrRedisUnavailable) {
			skipped++
		} else {
			g.Expect(skipped).To(BeZero(), "the guard keeps skipping once it has tripped")
			g.Expect(err).To(MatchError(context.DeadlineExceeded))
		}
	}
	g.Expect(skipped).To(BeNumerically(">", 10), "after tripping, decisions no longer wait on Redis")

	server.Thaw()
	g.Eventually(func() bool {
		d, err := guard.Allow(context.Background(), req)
		return err == nil && !d.Degraded
	}).WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(BeTrue())
}

func TestScriptFlushIsRecoveredTransparently(t *testing.T) {
	g := NewWithT(t)
	server := redistest.Start(t)
	guard := newGuard(t, server.URL())
	req := requestWith(t, config.FailClosed)
	for i := range 4 {
		if i == 2 {
			g.Expect(server.Client().ScriptFlush(context.Background()).Err()).To(Succeed())
		}
		d, err := guard.Allow(context.Background(), req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Degraded).To(BeFalse())
		g.Expect(d.Remaining).To(Equal(int64(9 - i)))
	}
}

func TestCallerGivingUpIsNotARedisFailure(t *testing.T) {
	g := NewWithT(t)
	guard := newGuard(t, standalone.URL())
	req := requestWith(t, config.FailClosed)
	for range tripAfter + 1 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the client hung up before the decision
		_, err := guard.Allow(ctx, req)
		g.Expect(err).To(MatchError(context.Canceled))
	}
	g.Expect(guard.Health().Reachable).To(BeTrue())
	d, err := guard.Allow(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred(), "Redis is still asked: the guard did not trip")
	g.Expect(d.Degraded).To(BeFalse())
}

func TestOneStalledBatchDoesNotTripTheGuard(t *testing.T) {
	g := NewWithT(t)
	guard := newGuard(t, standalone.URL())
	req := requestWith(t, config.FailClosed)
	// Many requests of one batch failing in the same instant, as when the
	// enforcer was starved of CPU, say nothing lasting about Redis.
	for range 10 {
		guard.failed(context.DeadlineExceeded)
	}
	d, err := guard.Allow(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred(), "Redis is still asked")
	g.Expect(d.Allowed).To(BeTrue())
}
