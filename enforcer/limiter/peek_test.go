package limiter

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestPeekAnswersAsTheRefusal: a peek at a refused bucket says refused,
// with the deciding window and wait the refusals around it give, and takes
// nothing, whatever the algorithm.
func TestPeekAnswersAsTheRefusal(t *testing.T) {
	for name, url := range topologies() {
		for _, a := range []Algorithm{TokenBucket, FixedWindow, SlidingWindowLog, SlidingWindowCounter, GCRA} {
			t.Run(name+"/"+string(a), func(t *testing.T) {
				g := NewWithT(t)
				r := newRedis(t, url)
				ctx := context.Background()
				// 2 per minute and 3 per hour: the minute refuses first.
				req := mustCheck(t, Request{Bucket: bucketFor(t), Algorithm: a, Cost: 1,
					Windows: []Window{{Requests: 3, Period: time.Hour}, {Requests: 2, Period: time.Minute}}})
				free, err := r.Peek(ctx, req)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(free.Allowed).To(BeTrue())
				g.Expect(free.RetryAfter).To(BeZero())
				for range 2 {
					g.Expect(allow(t, r, req).Allowed).To(BeTrue())
				}
				before := allow(t, r, req)
				g.Expect(before.Allowed).To(BeFalse())
				peek, err := r.Peek(ctx, req)
				g.Expect(err).NotTo(HaveOccurred())
				after := allow(t, r, req)
				g.Expect(after.Allowed).To(BeFalse(), "the peek took nothing, and the refusals neither")

				g.Expect(peek.Allowed).To(BeFalse())
				g.Expect(peek.Window).To(Equal(before.Window), "the window that refuses decides")
				g.Expect(peek.Limit).To(Equal(int64(2)))
				g.Expect(peek.Remaining).To(BeZero())
				g.Expect(peek.RetryAfter).To(BeNumerically(">", 0))
				// the same instant to go back to, give or take the clock between the calls
				g.Expect(peek.Now.Add(peek.RetryAfter)).To(BeTemporally("~", before.Now.Add(before.RetryAfter), time.Millisecond))
				g.Expect(peek.Now.Add(peek.RetryAfter)).To(BeTemporally("~", after.Now.Add(after.RetryAfter), time.Millisecond))
			})
		}
	}
}

// TestPeekWaitsForTheCost: the wait a peek reports is the wait for the
// rule's cost, not for a single unit.
func TestPeekWaitsForTheCost(t *testing.T) {
	g := NewWithT(t)
	r := newRedis(t, standalone.URL())
	ctx := context.Background()
	req := mustCheck(t, Request{Bucket: bucketFor(t), Algorithm: TokenBucket, Cost: 3,
		Windows: []Window{{Requests: 60, Period: time.Minute, Burst: 4}}})
	g.Expect(allow(t, r, req).Allowed).To(BeTrue())
	peek, err := r.Peek(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(peek.Allowed).To(BeFalse(), "one token left, three needed")
	g.Expect(peek.Remaining).To(Equal(int64(1)))
	// a token a second: two more seconds
	g.Expect(peek.RetryAfter).To(BeNumerically("~", 2*time.Second, 50*time.Millisecond))
}

// TestPeekReportsADelay: for a rule with onLimit.delay, a wait within the
// delay is a reservation, a longer one a refusal for the wait less the
// delay, as Allow answers.
func TestPeekReportsADelay(t *testing.T) {
	for _, a := range delayAlgorithms {
		t.Run(string(a), func(t *testing.T) {
			g := NewWithT(t)
			r := newRedis(t, standalone.URL())
			ctx := context.Background()
			b := bucketFor(t)
			rule, err := newRule(b, a, []Window{{Requests: 1, Period: 2 * time.Second}}, 1, FailurePolicy{}, withDelay(3*time.Second))
			g.Expect(err).NotTo(HaveOccurred())
			req := rule.Request(b.Tenant)
			g.Expect(allow(t, r, req).Delay).To(BeZero())
			peek, err := r.Peek(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(peek.Allowed).To(BeTrue(), "the next unit is 2s away, within the delay")
			g.Expect(peek.Delay).To(BeNumerically("~", 2*time.Second, 50*time.Millisecond))
			g.Expect(allow(t, r, req).Delay).To(BeNumerically("~", peek.Delay, 50*time.Millisecond), "the peek booked nothing")

			peek, err = r.Peek(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			refused := allow(t, r, req)
			g.Expect(refused.Allowed).To(BeFalse(), "4s away, beyond the delay")
			g.Expect(peek.Allowed).To(BeFalse())
			g.Expect(peek.RetryAfter).To(BeNumerically("~", refused.RetryAfter, 50*time.Millisecond))
			g.Expect(peek.RetryAfter).To(BeNumerically("~", time.Second, 50*time.Millisecond))
		})
	}
}
