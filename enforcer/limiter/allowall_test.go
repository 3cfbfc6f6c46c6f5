package limiter

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// An HTTP request that one rule refuses consumes nothing from the others:
// their buckets live under other hash tags (other slots on a cluster), so the
// proxy refunds what they took.
func TestRefusedRequestIsRefundedInOtherRules(t *testing.T) {
	for name, url := range topologies() {
		for _, a := range config.Algorithms {
			t.Run(name+"/"+string(a), func(t *testing.T) {
				g := NewWithT(t)
				guard := newGuard(t, url)
				generous := Request{Bucket: bucketFor(t), Algorithm: a, Cost: 2,
					Windows: []Window{{Requests: 10, Period: time.Minute}, {Requests: 100, Period: time.Hour}},
					// a second for Redis: the test is about refunds, not a busy machine's latency
					Failure: FailurePolicy{Mode: config.FailClosed, Timeout: time.Second}}
				strict := generous
				strict.Bucket.Rule = "strict"
				strict.Windows = []Window{{Requests: 2, Period: time.Hour}}

				reqs := []Request{mustCheck(t, generous), mustCheck(t, strict)}
				var out []Admission
				for i := range 4 {
					out = guard.Decide(context.Background(), reqs, out)
					g.Expect(out).To(HaveLen(2))
					g.Expect(out[0].Err).NotTo(HaveOccurred())
					g.Expect(out[1].Err).NotTo(HaveOccurred())
					g.Expect(out[0].Decision.Allowed).To(BeTrue())
					g.Expect(out[1].Decision.Allowed).To(Equal(i == 0), "round %d", i)
					if !out[1].Decision.Allowed {
						g.Expect(guard.refund(context.Background(), []Request{reqs[0]}, []time.Time{out[0].Decision.CountedAt})).To(Succeed())
					}
				}
				for _, w := range generous.Windows {
					alone := generous
					alone.Windows = []Window{w}
					d, err := guard.redis.Peek(context.Background(), mustCheck(t, alone))
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(d.Remaining).To(Equal(w.Requests-2), "only the admitted request counts in the %s window", w.Period)
				}
			})
		}
	}
}

func TestAllowAllDecidesEachRequestOnItsOwn(t *testing.T) {
	g := NewWithT(t)
	server := standalone
	guard := newGuard(t, server.URL())
	built := Request{Bucket: bucketFor(t), Algorithm: FixedWindow, Cost: 1,
		Windows: []Window{{Requests: 5, Period: time.Hour}}}
	ok := mustCheck(t, built)
	out := guard.Decide(context.Background(), []Request{built, ok, ok}, nil)
	g.Expect(out[0].Err).To(MatchError(ErrInvalidRequest), "a Request no Rule built is refused")
	g.Expect(out[0].Decision.Allowed).To(BeFalse())
	g.Expect(out[1].Decision.Remaining).To(Equal(int64(4)))
	g.Expect(out[2].Decision.Remaining).To(Equal(int64(3)))
}
