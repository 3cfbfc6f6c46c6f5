package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// Batch is one request's checks, each with the guard of the Redis that
// decides it, and their admissions: the decide and settle that the
// sidecar's pipeline and the rate limit service share. A caller turns its
// request into checks (Add), decides them in one round trip per backend
// (Decide), renders its answer from the admissions, and settles: a
// refused request takes nothing from any check (Refuse), an admitted one
// holds its slots while it runs (Admit, then Release). Each admission is
// Redis's decision or, when Redis failed, the check's policy's failure
// mode's (limiter.Guard), and the handle that settles what it took
// (limiter.Admission). A Batch is reused across requests (Reset): it keeps
// its slices, so that deciding allocates nothing of its own.
type Batch struct {
	// Requests are the checks, Guards their backends' guards, one for one;
	// Admissions are Decide's answers, one for one.
	Requests   []limiter.Request
	Guards     []*limiter.Guard
	Admissions []limiter.Admission

	// slotChecks are the indexes of the Concurrency checks.
	slotChecks []int
	// scratch for one backend's share of the checks
	sub     []limiter.Request
	subAdms []limiter.Admission
	index   []int
}

// RoundTrip is told the time a backend took to answer a request's checks.
type RoundTrip func(g *limiter.Guard, took time.Duration)

// Reset empties b for the next request, dropping the references it holds.
func (b *Batch) Reset() {
	clear(b.Requests)
	clear(b.Guards)
	clear(b.Admissions)
	b.Requests, b.Guards, b.Admissions = b.Requests[:0], b.Guards[:0], b.Admissions[:0]
	b.slotChecks = b.slotChecks[:0]
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
		b.Admissions = b.Admissions[:0]
		return
	}
	if b.oneGuard() {
		g, start := b.Guards[0], time.Now()
		b.Admissions = g.Decide(ctx, b.Requests, b.Admissions)
		observe(roundTrip, g, start, b.Admissions)
		return
	}
	b.Admissions = slices.Grow(b.Admissions[:0], n)[:n]
	b.eachGuard(func(g *limiter.Guard) {
		b.sub, b.index = b.sub[:0], b.index[:0]
		for i := range b.Requests {
			if b.Guards[i] == g {
				b.sub, b.index = append(b.sub, b.Requests[i]), append(b.index, i)
			}
		}
		start := time.Now()
		b.subAdms = g.Decide(ctx, b.sub, b.subAdms)
		observe(roundTrip, g, start, b.subAdms)
		for k, i := range b.index {
			b.Admissions[i] = b.subAdms[k]
		}
	})
	clear(b.sub)
	clear(b.subAdms)
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

func observe(roundTrip RoundTrip, g *limiter.Guard, start time.Time, adms []limiter.Admission) {
	if roundTrip == nil {
		return
	}
	for i := range adms {
		if !adms[i].Decision.Local && !errors.Is(adms[i].Err, limiter.ErrRedisUnavailable) {
			roundTrip(g, time.Since(start))
			return
		}
	}
}

// Refuses reports whether an admission refuses its request. One with no
// decision at all (an invalid request, which a caller's rules should
// never produce) does not: a bug must not take the application down.
func Refuses(a *limiter.Admission) bool {
	return !a.Decision.Allowed && (a.Err == nil || a.Decision.Degraded)
}

// taken reports whether check i's admission took something in Redis or a
// lease (a failure mode's admission took nothing there).
func (b *Batch) taken(i int) bool {
	a := &b.Admissions[i]
	return a.Err == nil && a.Decision.Allowed
}

// Refuse settles a refused request: every admission gives back what it
// took, so that the request counts nowhere, in one round trip per backend
// (a backend that fails costs only its own give-backs), LocalFallback
// slots included. The admissions given back then report what is left
// after the give-back, so that the refusal tells what the next request
// finds. It returns how many backends failed to take theirs back (best
// effort: at worst the refused request counts).
func (b *Batch) Refuse(ctx context.Context) (failed int) {
	for i := range b.Admissions {
		b.Admissions[i].GiveBack()
	}
	_ = limiter.Settle(ctx, b.Admissions) // the guards count Redis failures
	b.eachGuard(func(g *limiter.Guard) {
		for i := range b.Admissions {
			if b.Guards[i] == g && b.taken(i) && !b.Admissions[i].Settled() {
				failed++
				return
			}
		}
	})
	for i := range b.Admissions {
		if b.taken(i) && b.Admissions[i].Settled() {
			b.Admissions[i].Decision.Remaining += b.Requests[i].Cost
		}
	}
	return failed
}

// GivenBack reports whether Refuse gave back what check i took.
func (b *Batch) GivenBack(i int) bool { return b.taken(i) && b.Admissions[i].Settled() }

// Admit settles a request that goes on: its admitted Concurrency checks
// hold their slots (those handed over as it waited hold them already)
// until Release.
func (b *Batch) Admit() {
	for _, i := range b.slotChecks {
		b.Admissions[i].Hold()
	}
}

// Release gives back the slots the request holds: its answer has ended,
// its client has gone, or it was not forwarded after all.
func (b *Batch) Release() {
	for _, i := range b.slotChecks {
		if i < len(b.Admissions) {
			b.Admissions[i].Release()
		}
	}
}
