package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// Batch is one request's checks, each with the guard of the Redis that
// decides it, and their outcomes: the decide and settle that the sidecar's
// pipeline and the rate limit service share. A caller turns its request
// into checks (Add), decides them in one round trip per backend (Decide),
// reads the outcomes into its own answer, and settles: a refused request
// takes nothing from any check (Refuse), an admitted one holds its slots
// while it runs (Admit, then Release). Each outcome is Redis's decision or,
// when Redis failed, the check's policy's failure mode's (limiter.Guard).
// A Batch is reused across requests (Reset): it keeps its slices, so that
// deciding allocates nothing of its own.
type Batch struct {
	// Requests are the checks, Guards their backends' guards, one for one;
	// Outcomes are Decide's answers, one for one.
	Requests []limiter.Request
	Guards   []*limiter.Guard
	Outcomes []limiter.Outcome

	// slotChecks are the indexes of the Concurrency checks.
	slotChecks []int
	// held are the slots the request holds (Admit, Hand), released by
	// Release.
	held []heldSlot
	// given says, per check, that Refuse gave back what it took.
	given []bool
	// scratch for one backend's share of the checks
	sub     []limiter.Request
	subOuts []limiter.Outcome
	index   []int
	counted []time.Time
}

// heldSlot is a slot the request holds, the guard it came from and the
// index of its check.
type heldSlot struct {
	guard *limiter.Guard
	slot  limiter.Slot
	check int
}

// RoundTrip is told the time a backend took to answer a request's checks.
type RoundTrip func(g *limiter.Guard, took time.Duration)

// Reset empties b for the next request, dropping the references it holds.
func (b *Batch) Reset() {
	clear(b.Requests)
	clear(b.Guards)
	clear(b.held)
	b.Requests, b.Guards, b.Outcomes = b.Requests[:0], b.Guards[:0], b.Outcomes[:0]
	b.slotChecks, b.held, b.given = b.slotChecks[:0], b.held[:0], b.given[:0]
}

// Add appends check req, decided by guard g, and returns its index.
func (b *Batch) Add(g *limiter.Guard, req limiter.Request) int {
	i := len(b.Requests)
	b.Requests, b.Guards = append(b.Requests, req), append(b.Guards, g)
	if req.Algorithm == limiter.Concurrency {
		b.slotChecks = append(b.slotChecks, i)
	}
	return i
}

// Len is the number of checks.
func (b *Batch) Len() int { return len(b.Requests) }

// SlotChecks are the indexes of the Concurrency checks, whose admission
// is a slot held while the request runs.
func (b *Batch) SlotChecks() []int { return b.slotChecks }

// Decide asks each backend about its checks, in one round trip per
// backend, and tells roundTrip (when not nil) how long each took, unless
// no check went to Redis (the guard answers from leases and cached
// refusals without it, and skips it while it is known to be down).
func (b *Batch) Decide(ctx context.Context, roundTrip RoundTrip) {
	n := len(b.Requests)
	if n == 0 {
		b.Outcomes = b.Outcomes[:0]
		return
	}
	if b.oneGuard() {
		g, start := b.Guards[0], time.Now()
		b.Outcomes = g.AllowAll(ctx, b.Requests, b.Outcomes)
		observe(roundTrip, g, start, b.Outcomes)
		return
	}
	b.Outcomes = slices.Grow(b.Outcomes[:0], n)[:n]
	b.eachGuard(func(g *limiter.Guard) {
		b.sub, b.index = b.sub[:0], b.index[:0]
		for i := range b.Requests {
			if b.Guards[i] == g {
				b.sub, b.index = append(b.sub, b.Requests[i]), append(b.index, i)
			}
		}
		start := time.Now()
		b.subOuts = g.AllowAll(ctx, b.sub, b.subOuts)
		observe(roundTrip, g, start, b.subOuts)
		for k, i := range b.index {
			b.Outcomes[i] = b.subOuts[k]
		}
	})
	clear(b.sub)
}

// oneGuard reports whether one backend decides every check.
func (b *Batch) oneGuard() bool {
	for _, g := range b.Guards[1:] {
		if g != b.Guards[0] {
			return false
		}
	}
	return true
}

// eachGuard calls f with each distinct guard of the checks, in order of
// first use.
func (b *Batch) eachGuard(f func(g *limiter.Guard)) {
	for i, g := range b.Guards {
		if !slices.Contains(b.Guards[:i], g) {
			f(g)
		}
	}
}

func observe(roundTrip RoundTrip, g *limiter.Guard, start time.Time, outs []limiter.Outcome) {
	if roundTrip == nil {
		return
	}
	for i := range outs {
		if !outs[i].Decision.Local && !errors.Is(outs[i].Err, limiter.ErrRedisUnavailable) {
			roundTrip(g, time.Since(start))
			return
		}
	}
}

// Refuses reports whether an outcome refuses its request. An outcome with
// no decision at all (an invalid request, which a caller's rules should
// never produce) does not: a bug must not take the application down.
func Refuses(o *limiter.Outcome) bool {
	return !o.Decision.Allowed && (o.Err == nil || o.Decision.Degraded)
}

// taken reports whether check i's admission took something in Redis or a
// lease (a failure mode's admission took nothing there).
func (b *Batch) taken(i int) bool {
	o := &b.Outcomes[i]
	return o.Err == nil && o.Decision.Allowed
}

// Refuse settles a refused request: it gives back what its admitted
// checks took, so that it counts nowhere, in one refund per backend (a
// backend that fails costs only its own refund), and frees the
// LocalFallback slots its Concurrency checks took and it does not hold.
// The outcomes given back then report what is left after the refund, so
// that the refusal tells what the next request finds. It returns how
// many backends failed to take their refund back (best effort: at worst
// the refused request counts).
func (b *Batch) Refuse(ctx context.Context) (failed int) {
	if len(b.Outcomes) == 0 {
		return 0
	}
	b.given = append(b.given[:0], make([]bool, len(b.Requests))...)
	b.eachGuard(func(g *limiter.Guard) {
		b.sub, b.index, b.counted = b.sub[:0], b.index[:0], b.counted[:0]
		for i := range b.Requests {
			if b.Guards[i] == g && b.taken(i) {
				b.sub = append(b.sub, b.Requests[i])
				b.index = append(b.index, i)
				b.counted = append(b.counted, b.Outcomes[i].Decision.CountedAt)
			}
		}
		if len(b.sub) == 0 {
			return
		}
		if g.Refund(ctx, b.sub, b.counted) != nil {
			failed++
			return
		}
		for _, i := range b.index {
			b.given[i] = true
			b.Outcomes[i].Decision.Remaining += b.Requests[i].Cost
		}
	})
	clear(b.sub)
	for _, i := range b.slotChecks {
		if d := &b.Outcomes[i].Decision; d.Degraded && d.Allowed && !b.holds(i) {
			// Redis took nothing for it: the refund does not cover it
			s := b.Guards[i].Hold(&b.Requests[i], d)
			b.Guards[i].Free(&s)
		}
	}
	return failed
}

// GivenBack reports whether Refuse gave back what check i took.
func (b *Batch) GivenBack(i int) bool { return i < len(b.given) && b.given[i] }

// Admit settles a request that goes on: it holds the slots of its
// admitted Concurrency checks (those not handed over already) until
// Release.
func (b *Batch) Admit() {
	for _, i := range b.slotChecks {
		if b.holds(i) {
			continue
		}
		g := b.Guards[i]
		if s := g.Hold(&b.Requests[i], &b.Outcomes[i].Decision); s.Holds() {
			b.held = append(b.held, heldSlot{guard: g, slot: s, check: i})
		}
	}
}

// Hand records slot s, handed over to check i as it waited, as held by
// the request; its decision becomes an admission.
func (b *Batch) Hand(i int, s limiter.Slot) {
	b.held = append(b.held, heldSlot{guard: b.Guards[i], slot: s, check: i})
	d := &b.Outcomes[i].Decision
	d.Allowed, d.Remaining, d.RetryAfter, d.Reset = true, 0, 0, time.Now()
}

// Release gives back the slots the request holds: its answer has ended,
// its client has gone, or it was not forwarded after all.
func (b *Batch) Release() {
	for k := range b.held {
		b.held[k].guard.Free(&b.held[k].slot)
	}
	clear(b.held)
	b.held = b.held[:0]
}

// holds reports whether the request holds check i's slot.
func (b *Batch) holds(i int) bool {
	for k := range b.held {
		if b.held[k].check == i {
			return true
		}
	}
	return false
}
