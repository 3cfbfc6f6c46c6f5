package rls

import (
	"context"

	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// outcomeGivenBack is the outcome of a descriptor with is_negative_hits:
// it gave units back and was answered OK.
const outcomeGivenBack = "given_back"

// giveBack gives back what descriptors with is_negative_hits return, each
// its hits_addend, before the call's other descriptors are decided.
// Envoy's RateLimitDescriptor.is_negative_hits "adds to the rate limit
// budget instead of consuming from it"; envoyproxy/ratelimit has no such
// answer (it counts the hits as usual).
//
// It is the GiveBack of the limiter's Guard.Claim, capped as refunds are: a window is
// never given more than it counts (a fixed or sliding window never below
// empty, a token bucket or GCRA never above full), and a fixed window only
// gets back units of the window in progress. So however many units are
// given back, a bucket never holds more than its capacity: the most a
// tenant can use after is the limit.
//
// Each request is given back on its backend (on, one for one).
func (s *Service) giveBack(ctx context.Context, reqs []limiter.Request, on []*Backend) {
	for _, g := range groupByBackend(on) {
		claims := make([]limiter.Admission, len(g.index))
		for k, i := range g.index {
			claims[k] = g.backend.Guard.Claim(reqs[i])
			claims[k].GiveBack()
		}
		if err := limiter.Settle(ctx, claims); err != nil {
			s.metrics.countRefundFailure()
		}
	}
}
