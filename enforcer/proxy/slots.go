package proxy

import "github.com/sluice-dev/sluice/enforcer/limiter"

// Concurrency rules on the request path: a request admitted by one holds
// its slots (limiter.Guard.Hold) from its decision until the handler
// returns: when its response has ended, the client has hung up, the
// application failed or the request timed out. A stream (HTTP/2, gRPC, a
// websocket, a long download) holds them for its whole life, the handler
// returning only then.

// heldSlots are the slots one request holds, with the guard of each.
type heldSlots struct {
	guards []*limiter.Guard
	slots  []limiter.Slot
}

// concurrencyAnswers completes the decisions of st's Concurrency checks:
// a refusal's Retry-After is the rule's recent holding time (the scripts
// cannot know when a slot will free), and refusals are counted.
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
		g.CountRefused(&c.Request)
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
func (h *Handler) holdSlots(snap *inService, st *requestState) *heldSlots {
	var held *heldSlots
	for i := range st.checks {
		c := &st.checks[i]
		if c.Request.Algorithm != limiter.Concurrency {
			continue
		}
		g := snap.BackendOf(c.Policy).Guard
		s := g.Hold(&c.Request, &st.outs[i].Decision)
		if !s.Holds() {
			continue
		}
		if held == nil {
			held = &heldSlots{}
		}
		held.guards = append(held.guards, g)
		held.slots = append(held.slots, s)
	}
	return held
}

// free gives back what the request holds.
func (s *heldSlots) free() {
	if s == nil {
		return
	}
	for i := range s.slots {
		s.guards[i].Free(&s.slots[i])
	}
}

// freeRefusedLocal gives back the LocalFallback slots of a refused
// request's Concurrency checks: Redis took nothing for them, so the
// refund does not cover them.
func (h *Handler) freeRefusedLocal(snap *inService, st *requestState) {
	for i := range st.checks {
		c := &st.checks[i]
		if o := &st.outs[i]; c.Request.Algorithm == limiter.Concurrency && o.Decision.Degraded && o.Decision.Allowed {
			g := snap.BackendOf(c.Policy).Guard
			s := g.Hold(&c.Request, &o.Decision)
			g.Free(&s)
		}
	}
}
