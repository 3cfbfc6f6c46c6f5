package rls

import (
	"context"
	"time"

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
// It is the limiter's refund (Guard.Refund), capped the same way: a window
// is never given more than it counts (a fixed or sliding window never
// below empty, a token bucket or GCRA never above full), and a fixed
// window only gets back units of the window in progress. So however many
// units are given back, a bucket never holds more than its capacity: the
// most a tenant can use after is the limit. Each goes to Redis, never into
// a lease: a lease's units are not capped by the scripts.
func (s *Service) giveBack(ctx context.Context, reqs []limiter.Request) {
	if len(reqs) == 0 {
		return
	}
	counted := make([]time.Time, len(reqs))
	now := time.Now()
	for i := range reqs {
		reqs[i].Lease = false
		counted[i] = now
	}
	if err := s.guard.Refund(ctx, reqs, counted); err != nil {
		s.metrics.refundFailed()
	}
}
