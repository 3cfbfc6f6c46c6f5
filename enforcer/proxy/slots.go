package proxy

import (
	"context"
	"slices"

	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// Concurrency rules on the request path: a request admitted by one holds
// its slots (limiter.Admission.Hold) from its decision until the handler
// returns: when its response has ended, the client has hung up, the
// application failed or the request timed out. A stream (HTTP/2, gRPC, a
// websocket, a long download) holds them for its whole life, the handler
// returning only then.

// heldSlots are the admissions holding slots of one request, with the
// index of each one's check.
type heldSlots struct {
	slots  []limiter.Admission
	checks []int
}

func (s *heldSlots) add(a *limiter.Admission, check int) *heldSlots {
	if s == nil {
		s = &heldSlots{}
	}
	s.slots, s.checks = append(s.slots, *a), append(s.checks, check)
	return s
}

// has says whether s holds the slots of check i.
func (s *heldSlots) has(i int) bool {
	return s != nil && slices.Contains(s.checks, i)
}

// concurrencyAnswers completes the decisions of st's Concurrency checks:
// a refusal's Retry-After is the rule's recent holding time (the scripts
// cannot know when a slot will free).
func (h *Handler) concurrencyAnswers(snap *inService, st *requestState) {
	for i := range st.checks {
		c := &st.checks[i]
		if c.Request.Algorithm != limiter.Concurrency {
			continue
		}
		o := &st.outs[i]
		if !refuses(o) {
			continue
		}
		g := snap.BackendOf(c.Policy).Guard
		if o.Decision.Degraded || o.Decision.Ban.Active() {
			continue
		}
		wait := g.SlotWait(&c.Request)
		o.Decision.RetryAfter = wait
		o.Decision.Reset = o.Decision.Now.Add(wait)
	}
}

// holdSlots makes the slots of st's admitted Concurrency checks held by
// the request, nil when it holds none. Call it once the request goes on.
// held already holds the slots handed to the request as it waited.
func (h *Handler) holdSlots(snap *inService, st *requestState, held *heldSlots) *heldSlots {
	for i := range st.checks {
		c := &st.checks[i]
		if c.Request.Algorithm != limiter.Concurrency || held.has(i) {
			continue
		}
		if o := &st.outs[i]; o.Hold() {
			held = held.add(o, i)
		}
	}
	return held
}

// awaitSlots lets a request that only Concurrency rules with
// onLimit.delay refuse wait for their slots, each handed over by a request
// of this enforcer as it ends, in arrival order, up to the rule's
// delay.max; ctx is the client's, whose hang-up ends the wait. It returns
// the slots handed over, or nil when the request is refused after all
// (the refusals stand as decided).
func (h *Handler) awaitSlots(ctx context.Context, snap *inService, st *requestState) *heldSlots {
	for i := range st.checks {
		c, o := &st.checks[i], &st.outs[i]
		if !refuses(o) || c.Policy.DryRun {
			continue
		}
		if c.Request.Algorithm != limiter.Concurrency || c.Request.SlotWait() <= 0 || o.Err != nil ||
			o.Decision.Degraded || o.Decision.Ban.Active() {
			return nil
		}
	}
	var handed *heldSlots
	for i := range st.checks {
		c, o := &st.checks[i], &st.outs[i]
		if !refuses(o) || c.Policy.DryRun {
			continue
		}
		if ok, _ := o.AwaitSlot(ctx); !ok {
			handed.free()
			return nil
		}
		handed = handed.add(o, i)
	}
	return handed
}

// free gives back what the request holds.
func (s *heldSlots) free() {
	if s == nil {
		return
	}
	for i := range s.slots {
		s.slots[i].Release()
	}
}

// freeRefusedLocal gives back the LocalFallback slots of a refused
// request's Concurrency checks: Redis took nothing for them, so the
// refund does not cover them.
func (h *Handler) freeRefusedLocal(snap *inService, st *requestState) {
	for i := range st.checks {
		c := &st.checks[i]
		if o := &st.outs[i]; c.Request.Algorithm == limiter.Concurrency && o.Decision.Degraded && o.Decision.Allowed {
			o.GiveBack()
		}
	}
	_ = limiter.Settle(context.Background(), st.outs) // LocalFallback slots: no Redis call
}

// countSlotRefusals counts the refusals of st's Concurrency checks that
// stand, once waiting for a slot is over.
func (h *Handler) countSlotRefusals(snap *inService, st *requestState) {
	for i := range st.checks {
		if c := &st.checks[i]; c.Request.Algorithm == limiter.Concurrency && refuses(&st.outs[i]) {
			st.outs[i].CountRefusal()
		}
	}
}
