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
		o := &b.Outcomes[i]
		if engine.Refuses(o) && !o.Decision.Degraded && !o.Decision.Ban.Active() {
			wait := b.Guards[i].SlotWait(&b.Requests[i])
			o.Decision.RetryAfter = wait
			o.Decision.Reset = o.Decision.Now.Add(wait)
		}
	}
	h.handSlots(x)
	for _, i := range b.SlotChecks() {
		if engine.Refuses(&b.Outcomes[i]) {
			b.Guards[i].CountRefused(&b.Requests[i])
		}
	}
	return true
}

// handSlots lets a request that only Concurrency rules with onLimit.delay
// refuse wait for their slots, each handed over by a request of this
// enforcer as it ends, in arrival order, up to the rule's delay.max; the
// client's hang-up ends the wait. The slots handed over admit the request;
// when one is not, the refusals stand as decided.
func (h *Handler) handSlots(x *exchange) {
	b := &x.batch
	for i := range x.checks {
		o := &b.Outcomes[i]
		if !engine.Refuses(o) || x.checks[i].Policy.DryRun {
			continue
		}
		req := &b.Requests[i]
		if req.Algorithm != limiter.Concurrency || req.SlotWait <= 0 || o.Err != nil ||
			o.Decision.Degraded || o.Decision.Ban.Active() {
			return
		}
	}
	var buf [2]handedSlot
	handed := buf[:0]
	for i := range x.checks {
		if !engine.Refuses(&b.Outcomes[i]) || x.checks[i].Policy.DryRun {
			continue
		}
		s, ok, _ := b.Guards[i].AwaitSlot(x.r.Context(), &b.Requests[i])
		if !ok {
			for k := range handed {
				b.Guards[handed[k].check].Free(&handed[k].slot)
			}
			return
		}
		handed = append(handed, handedSlot{slot: s, check: i})
	}
	for _, s := range handed {
		b.Hand(s.check, s.slot)
	}
}

// handedSlot is a slot handed over to check.
type handedSlot struct {
	slot  limiter.Slot
	check int
}
