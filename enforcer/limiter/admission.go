package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// Admission is a guard's answer to one Request (Guard.Decide) and the
// handle that settles it, as Limitador settles a reservation: what the
// request took is given back (GiveBack), charged the answer's cost
// (Charge), held as a Concurrency slot until the request ends (Hold,
// Release) or, refused for want of one, waited for (AwaitSlot). GiveBack
// and Charge mark the act; Settle sends the marked acts of a request's
// admissions, one round trip per Redis. Copy an Admission only to keep it
// (a held slot is released once, from one copy).
type Admission struct {
	Decision Decision
	// Err is nil, a Redis failure (Decision is then the failure mode's,
	// Degraded), or ErrInvalidRequest (Decision is then zero and refuses).
	Err error

	g   *Guard
	req Request
	// act is what Settle sends next, units its units; claimed is set for
	// units the caller says it holds (Guard.Claim), not a decision's.
	act     act
	units   int64
	claimed bool
	// settled and debt are what the last Settle reported.
	settled bool
	debt    int64
	slot    slot
}

// act is an Admission's settling act.
type act uint8

const (
	actNone act = iota
	// actGiveBack gives back what the admission took: to its lease or to
	// Redis, at the time it was counted (a claim: now).
	actGiveBack
	// actLocalSlot gives back a LocalFallback slot.
	actLocalSlot
	// actCharge charges units more (fewer when negative) after the answer.
	actCharge
)

// Request is the request the admission answered.
func (a *Admission) Request() *Request { return &a.req }

// Claim is an Admission of what the caller says req holds, not of a
// decision: units a client gives back on its own word (Envoy's
// is_negative_hits). Its GiveBack returns req.Cost units into the window
// in progress, with a refund's caps: no window is given more than it
// counts, so a bucket never admits more than its limit after it. Settle
// first returns this guard's lease of the bucket, so that units it leased
// are not taken for units used, and forgets its cached refusal, so that
// the room given back is seen. Units the leases of other guards hold count
// as used until they return them (within leaseFor).
func (g *Guard) Claim(req Request) Admission {
	return Admission{Decision: Decision{Allowed: true}, g: g, req: req, claimed: true}
}

// GiveBack marks what the admission took to be given back by Settle: the
// request was refused by another check, or its answer does not count.
// Only what was taken goes back: into the bucket's lease when it holds
// one of the same fixed window, to Redis otherwise; a LocalFallback slot
// to this enforcer. A refusal, and a failure mode's admission that took
// nothing, give back nothing.
func (a *Admission) GiveBack() {
	switch {
	case a.claimed:
		a.act = actGiveBack
	case !a.Decision.Allowed:
	case a.Err == nil && !a.Decision.Degraded:
		a.act = actGiveBack
	case a.req.Algorithm == Concurrency && a.Decision.Degraded && a.req.Failure.Mode == config.FailLocal:
		a.act = actLocalSlot
	}
}

// Charge marks the admission's request to have cost units in all, as its
// answer reported (responseCost): Settle charges the difference from what
// it took, or gives back what it did not use. A charge always lands, into
// debt if it must (charge.lua); a give back has a refund's caps. Rules
// whose cost the answer reports do not lease (NewRule), so every unit is
// in Redis. Only an admission Redis counted is charged.
func (a *Admission) Charge(units int64) {
	if a.claimed || !a.Decision.Allowed || a.Err != nil || a.Decision.Degraded || units == a.req.Cost {
		return
	}
	a.act, a.units = actCharge, units-a.req.Cost
}

// Settled reports whether the last Settle reported no error for the
// admission's batch (one per guard): what was marked was settled.
func (a *Admission) Settled() bool { return a.settled }

// Debt is, after a Charge was settled, the deepest debt of the request's
// windows (charge.lua).
func (a *Admission) Debt() int64 { return a.debt }

// Settle sends what the admissions were marked to settle (GiveBack,
// Charge), in one pipelined round trip per guard, and clears the marks. It
// waits no longer than the longest failure timeout of each guard's batch;
// the guard counts Redis failures. While Redis is known to be down, what
// only Redis could take is not sent and reports no error.
func Settle(ctx context.Context, adms []Admission) error {
	var errs []error
	for i := range adms {
		if adms[i].act != actNone && adms[i].g != nil {
			if err := adms[i].g.settleBatch(ctx, adms[i:]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// settleBatch settles the marked admissions of g among adms, in order:
// claims end the buckets' leases (one round trip of lease returns), then
// refunds go to leases where they can, and what is left of refunds,
// claims and charges is sent together.
func (g *Guard) settleBatch(ctx context.Context, adms []Admission) error {
	var batch []*Admission
	for i := range adms {
		if a := &adms[i]; a.g == g && a.act != actNone {
			batch = append(batch, a)
		}
	}
	var calls []*Admission
	var timeout time.Duration
	skip := g.skipping()
	var returns []pendingReturn
	now := g.clock.now()
	for _, a := range batch {
		req := &a.req
		switch {
		case a.act == actLocalSlot:
			// a LocalFallback slot Redis never counted: back at once
			a.Hold()
			a.Release()
			continue
		case a.act == actCharge || a.claimed:
			if skip {
				continue
			}
			// a cached refusal of the bucket would not see room given back
			k := windowsKey(req)
			g.cache.forget(k)
			if a.claimed {
				returns = g.leases.end(k, now, returns)
			} else {
				g.leases.counts(req.Bucket.Policy).RedisCalls.Add(1)
			}
		case req.delays():
			// a delay rule's admission may be a reservation, whose units
			// belong to a later time than a lease admits at (delay.go);
			// the capacity it frees may delay the bucket's next request
			g.cache.forget(windowsKey(req))
			if skip {
				continue
			}
			g.leases.counts(req.Bucket.Policy).RedisCalls.Add(1)
		case req.f.lease && g.leases.refund(req, a.Decision.CountedAt):
			continue
		default:
			if skip {
				continue
			}
			g.leases.counts(req.Bucket.Policy).RedisCalls.Add(1)
		}
		timeout = max(timeout, req.Failure.timeout())
		calls = append(calls, a)
	}
	var err error
	if len(calls) > 0 {
		err = g.send(ctx, calls, returns, timeout)
	}
	for _, a := range batch {
		a.act, a.units, a.settled = actNone, 0, err == nil
	}
	return err
}

// send sends the give-backs and charges of calls in one pipelined round
// trip, after returns (the leases claims ended), and reports their errors.
func (g *Guard) send(ctx context.Context, calls []*Admission, returns []pendingReturn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if len(returns) > 0 {
		g.leases.giveBack(ctx, g.redis, returns)
	}
	at := g.now().UnixMicro()
	sent := make([]scriptCall, len(calls))
	scripts := make([]algorithmScript, len(calls))
	for i, a := range calls {
		req := &a.req
		if a.act == actCharge {
			scripts[i], sent[i] = chargeScript, g.redis.send(ctx, chargeCmd(req, a.units, a.Decision.CountedAt.UnixMicro()))
			continue
		}
		units, counted := req.Cost, a.Decision.CountedAt.UnixMicro()
		if a.claimed {
			counted = at
		}
		var args []any
		// a calendar window's refund is sent the window of when it was counted
		scripts[i], args = evalSHA(req, -units, counted, counted)
		sent[i] = g.redis.send(ctx, args)
	}
	var errs []error
	for i, c := range sent {
		a := calls[i]
		raw, err := g.redis.receive(ctx, scripts[i], c)
		if a.act == actCharge {
			if err == nil {
				a.debt, err = parseChargeReply(raw, len(a.req.Windows))
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("redis charge %s: %w", a.req.Bucket, err))
			}
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("redis refund %s: %w", a.req.Bucket, err))
		}
	}
	return errors.Join(errs...)
}
