package proxy

import (
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// Concurrency rules on the request path: a request admitted by one holds
// its slots from its decision until the handler returns (engine.Batch's
// Admit and Release): when its response has ended, the client has hung
// up, the application failed or the request timed out. A stream (HTTP/2,
// gRPC, a websocket, a long download) holds them for its whole life, the
// handler returning only then.

// awaitSlots completes the decisions of the Concurrency checks: a
// refusal's Retry-After is the rule's recent holding time (the scripts
// cannot know when a slot will free); a request that only Concurrency
// rules with onLimit.delay refuse waits for their slots (handSlots); the
// refusals that stand are counted.
func (h *Handler) awaitSlots(x *exchange) bool {
	b := &x.batch
	if len(b.SlotChecks()) == 0 {
		return true
	}
	for _, i := range b.SlotChecks() {
		a := &b.Admissions[i]
		if engine.Refuses(a) && !a.Decision.Degraded && !a.Decision.Ban.Active() {
			wait := b.Guards[i].SlotWait(&b.Requests[i])
			a.Decision.RetryAfter = wait
			a.Decision.Reset = a.Decision.Now.Add(wait)
		}
	}
	h.handSlots(x)
	for _, i := range b.SlotChecks() {
		if a := &b.Admissions[i]; engine.Refuses(a) {
			a.CountRefusal()
		}
	}
	return true
}

// handSlots lets a request that only Concurrency rules with onLimit.delay
// refuse wait for their slots, each handed over by a request of this
// enforcer as it ends, in arrival order, up to the rule's delay.max; the
// client's hang-up ends the wait. The slots handed over admit the request;
// when one is not, those handed are given back and the refusals stand as
// decided.
func (h *Handler) handSlots(x *exchange) {
	b := &x.batch
	for i := range x.checks {
		a := &b.Admissions[i]
		if !engine.Refuses(a) || x.checks[i].Policy.DryRun {
			continue
		}
		req := &b.Requests[i]
		if req.Algorithm != limiter.Concurrency || req.SlotWait() <= 0 || a.Err != nil ||
			a.Decision.Degraded || a.Decision.Ban.Active() {
			return
		}
	}
	var buf [2]refusedSlot
	handed := buf[:0]
	for i := range x.checks {
		a := &b.Admissions[i]
		if !engine.Refuses(a) || x.checks[i].Policy.DryRun {
			continue
		}
		refused := a.Decision
		if ok, _ := a.AwaitSlot(x.r.Context()); !ok {
			for _, s := range handed {
				b.Admissions[s.check].Release()
				b.Admissions[s.check].Decision = s.refused
			}
			return
		}
		handed = append(handed, refusedSlot{check: i, refused: refused})
	}
}

// refusedSlot is a check handed a slot as it waited, and its refusal.
type refusedSlot struct {
	check   int
	refused limiter.Decision
}
