package rls

import (
	"context"
	"sync/atomic"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// maxHits bounds what one descriptor may count: far above any limit, and
// far from overflowing the scripts' arithmetic.
const maxHits = 1 << 40

// Service is a ratelimitv3.RateLimitServiceServer deciding each domain on
// its Backend: the one ApplyAllOn resolved for its policy, else the
// service's own.
type Service struct {
	ratelimitv3.UnimplementedRateLimitServiceServer

	// def is the backend of the domains ApplyAllOn resolved none for.
	def     *Backend
	metrics *Metrics
	table   atomic.Pointer[Table]
	headers atomic.Pointer[ResponseHeaders]
	bounds  atomic.Pointer[Bounds]
	// large is the budget large calls share (bounds.go).
	large atomic.Pointer[largeBudget]
	// decisions are per policy, for /status (decisions.go).
	decisions decisions
}

// NewService answers from the table Apply puts in service; until then,
// every descriptor is admitted. metrics may be nil; a Metrics counts for
// one Service, which registers its guard's counters with it.
func NewService(guard *limiter.Guard, redis *limiter.Redis, metrics *Metrics) *Service {
	s := &Service{def: &Backend{Guard: guard, Redis: redis}, metrics: metrics}
	_ = s.SetBounds(DefaultBounds)
	metrics.watch(s)
	return s
}

// Apply compiles cfg and puts it in service; calls in flight finish with
// the table they started with. Leases taken under the old limits are
// given back.
func (s *Service) Apply(ctx context.Context, cfg *config.Config) error {
	return s.ApplyAll(ctx, cfg)
}

// Table is the table in service, nil before the first Apply.
func (s *Service) Table() *Table { return s.table.Load() }

// descriptorCall is one descriptor of a call: its rule and what was asked.
type descriptorCall struct {
	rule *Rule
	// check is the index of the descriptor's check in checks or peeks,
	// -1 when no limit applies (no rule, unlimited, replaced).
	check int
	peek  bool
	// zero is set for an override of 0 requests per unit: the decision is
	// zeros[check], made without Redis (override.go).
	zero bool
	// negative is set for is_negative_hits: the descriptor gives back and
	// is answered OK with its bucket's state (negative.go).
	negative bool
	// outcome says why no limit applied, for metrics.
	outcome string
}

// ShouldRateLimit decides every descriptor of req. The call is refused
// (OVER_LIMIT) when a descriptor is refused by a rule not in shadow mode;
// a refused call then gives back what its other descriptors took, so it
// consumes nothing.
func (s *Service) ShouldRateLimit(ctx context.Context, req *ratelimitv3.RateLimitRequest) (*ratelimitv3.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		return nil, status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	}
	t := s.table.Load()
	domainLabel := ""
	if t.domain(req.Domain) != nil {
		domainLabel = req.Domain
	}
	if bound, err := s.bounds.Load().overBounds(req); err != nil {
		s.metrics.countOversized(domainLabel, bound)
		return nil, err
	}
	calls := make([]descriptorCall, len(req.Descriptors))
	// Few calls carry a rule that replaces another: the set is made for
	// those only (a nil map reads as empty).
	var replaced map[string]bool
	for i, desc := range req.Descriptors {
		r := t.Match(req.Domain, desc.GetEntries())
		if o := desc.GetLimit(); o != nil {
			var err error
			if r, err = t.Override(req.Domain, r, o); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "descriptors[%d].limit: %v", i, err)
			}
		}
		calls[i] = descriptorCall{rule: r, check: -1, outcome: outcomeNoRule, negative: desc.GetIsNegativeHits()}
		if r != nil {
			for _, name := range r.Replaces {
				if replaced == nil {
					replaced = make(map[string]bool, len(r.Replaces))
				}
				replaced[name] = true
			}
		}
	}
	// checks are the descriptors that count, each on its backend's guard;
	// peeks and gives count nothing (peekOn and giveOn are their backends,
	// one for one).
	var checks engine.Batch
	var peeks, gives []limiter.Request
	var peekOn, giveOn []*Backend
	var zeros []limiter.Decision
	for i, desc := range req.Descriptors {
		c := &calls[i]
		var be *Backend
		if c.rule != nil {
			be = s.backendOf(c.rule.domain)
		}
		switch r := c.rule; {
		case r == nil:
		case r.LimitName != "" && replaced[r.LimitName]:
			c.outcome = outcomeReplaced
		case r.Unlimited:
			c.outcome = outcomeUnlimited
		case r.zero != nil:
			c.check, c.zero = len(zeros), true
			zeros = append(zeros, zeroDecision(r, !c.negative && hitsOf(req, desc) > 0))
		case c.negative:
			if hits := hitsOf(req, desc); hits > 0 {
				gives, giveOn = append(gives, r.Request(desc.GetEntries(), hits)), append(giveOn, be)
			}
			c.check, c.peek, peeks, peekOn = len(peeks), true, append(peeks, r.Request(desc.GetEntries(), 1)), append(peekOn, be)
		default:
			hits := hitsOf(req, desc)
			lr := r.Request(desc.GetEntries(), max(hits, 1))
			if hits == 0 {
				c.check, c.peek, peeks, peekOn = len(peeks), true, append(peeks, lr), append(peekOn, be)
			} else {
				c.check = checks.Add(be.Guard, lr)
			}
		}
	}
	release, err := s.shareOf(ctx, len(gives)+checks.Len()+len(peeks))
	if err != nil {
		s.metrics.countOversized(domainLabel, boundInFlight)
		return nil, err
	}
	defer release()
	s.giveBack(ctx, gives, giveOn)
	checks.Decide(ctx, nil)
	peeked := s.peek(ctx, req.Domain, peeks, peekOn)
	for _, o := range checks.Admissions {
		if o.Err != nil && !o.Decision.Degraded {
			// a request the limiter could not take: a bug, never a client's
			return nil, status.Errorf(codes.Internal, "rate limit check: %v", o.Err)
		}
	}
	resp := &ratelimitv3.RateLimitResponse{OverallCode: ratelimitv3.RateLimitResponse_OK,
		Statuses: make([]*ratelimitv3.RateLimitResponse_DescriptorStatus, len(calls))}
	decisionOf := func(c *descriptorCall) (limiter.Decision, int64) {
		if c.zero {
			return zeros[c.check], 0
		}
		if c.peek {
			return peeked[c.check], 0
		}
		return checks.Admissions[c.check].Decision, checks.Requests[c.check].Cost
	}
	windowsOf := func(c *descriptorCall) []limiter.Window {
		if c.zero {
			return c.rule.Windows()
		}
		if c.peek {
			return peeks[c.check].Windows
		}
		return checks.Requests[c.check].Windows
	}
	for i := range calls {
		c := &calls[i]
		if c.check < 0 {
			continue
		}
		d, cost := decisionOf(c)
		s.metrics.hits(c.rule, d, cost, c.rule.Shadow || c.rule.domain.dryRun) // as decided, before a refund
		if !d.Allowed && !c.negative && !c.rule.Shadow && !c.rule.domain.dryRun {
			resp.OverallCode = ratelimitv3.RateLimitResponse_OVER_LIMIT
		}
	}
	if resp.OverallCode == ratelimitv3.RateLimitResponse_OVER_LIMIT {
		// a refused call counts nowhere: the outcomes given back then
		// report what is left after the refund
		for range checks.Refuse(ctx) {
			s.metrics.countRefundFailure()
		}
	}
	headers := s.headers.Load()
	var reports []report
	var tally callTally
	for i := range calls {
		c := &calls[i]
		if c.check < 0 {
			resp.Statuses[i] = noLimitStatus(c.outcome)
			s.metrics.descriptor(domainLabel, c.rule, c.outcome)
			continue
		}
		d, _ := decisionOf(c)
		shadow := c.rule.Shadow || c.rule.domain.dryRun
		st := descriptorStatus(c.rule, windowsOf(c), d)
		outcome := outcomeAllowed
		switch {
		case c.negative:
			outcome, st.Code = outcomeGivenBack, ratelimitv3.RateLimitResponse_OK
		case !d.Allowed:
			outcome = outcomeOverLimit
			if shadow {
				outcome = outcomeShadowOverLimit
				st.Code = ratelimitv3.RateLimitResponse_OK
			}
		}
		if headers.Enabled() {
			ws := windowsOf(c)
			reports = append(reports, report{rule: c.rule, window: ws[min(d.Window, len(ws)-1)], decision: d, status: st, refused: st.Code == ratelimitv3.RateLimitResponse_OVER_LIMIT})
		}
		if d.Degraded {
			s.metrics.countDegraded()
		}
		s.metrics.descriptor(domainLabel, c.rule, outcome)
		tally.add(outcome, d.Degraded)
		resp.Statuses[i] = st
	}
	s.record(t, req.Domain, resp.OverallCode, tally)
	resp.ResponseHeadersToAdd = headers.render(reports, resp.OverallCode)
	s.metrics.call(resp.OverallCode)
	return resp, nil
}

// hitsOf is what desc counts: its own hits_addend when set (zero checks
// without counting), else the call's, zero meaning one.
func hitsOf(req *ratelimitv3.RateLimitRequest, desc *ratelimitv3common.RateLimitDescriptor) int64 {
	if h := desc.GetHitsAddend(); h != nil {
		return int64(min(h.GetValue(), maxHits))
	}
	return int64(max(1, req.GetHitsAddend()))
}

// peek decides reqs as one more request would be, counting nothing: a
// descriptor whose hits_addend is 0 is refused when its bucket has no room
// left, each on its backend (on, one for one), all of a backend in one
// round trip. When Redis fails, the policy's failure mode answers: Closed
// refuses, the others admit. domain is the call's, which has a policy.
func (s *Service) peek(ctx context.Context, domain string, reqs []limiter.Request, on []*Backend) []limiter.Decision {
	out := make([]limiter.Decision, len(reqs))
	for _, g := range groupByBackend(on) {
		sub := make([]limiter.Request, len(g.index))
		for k, i := range g.index {
			sub[k] = reqs[i]
		}
		s.metrics.countPeeks(domain, len(sub))
		ds, errs := g.backend.Redis.PeekAll(ctx, sub)
		for k, i := range g.index {
			out[i] = ds[k]
			if errs[k] != nil {
				out[i] = failedPeek(&reqs[i])
			}
		}
	}
	return out
}

// failedPeek is the failure mode's answer to a peek Redis did not answer.
func failedPeek(r *limiter.Request) limiter.Decision {
	now := time.Now()
	w := r.Windows[0]
	d := limiter.Decision{Allowed: r.Failure.Mode != config.FailClosed, Limit: w.Requests, Period: w.Length(now), Calendar: w.Calendar,
		Remaining: w.Requests, Reset: now, Now: now, Degraded: true}
	if !d.Allowed {
		d.Remaining, d.RetryAfter, d.Reset = 0, time.Second, now.Add(time.Second)
	}
	return d
}
