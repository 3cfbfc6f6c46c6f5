package limiter

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// errUncheckedRequest answers a Request that Rule.Request did not build, or
// built for an empty tenant: a bug, never a configuration (config.Parse and
// NewRule check those once). The check costs one field read; the guard does
// not guess a decision: it asks neither Redis nor a failure mode, and the
// proxy counts the outcome as a check error (sluice_enforcer_check_errors_total), so
// a bug that lifts a limit is never silent.
var errUncheckedRequest = fmt.Errorf("%w: not built from a checked rule", ErrInvalidRequest)

// Decide decides every rule an HTTP request must pass, one Admission per
// request. Rules that lease are answered from their bucket's lease or
// cached refusal when it can; the others go to Redis together, in one
// pipelined round trip, and each waits no longer than its own policy's
// timeout. out is reused when it has room.
func (g *Guard) Decide(ctx context.Context, reqs []Request, out []Admission) []Admission {
	out = slices.Grow(out[:0], len(reqs))[:len(reqs)]
	var skip, skipKnown bool
	now := g.now()
	var buf [2]guardCheck
	pending := buf[:0]
	for i := range reqs {
		req := &reqs[i]
		out[i] = Admission{g: g, req: *req}
		if !req.f.checked {
			out[i].Err = errUncheckedRequest
			continue
		}
		// A banned tenant first: refused from its cached ban, no Redis call.
		var ban Decision
		var banned cacheAnswer
		if req.f.ban != nil {
			if ban, banned = g.cache.lookup(banKey(req.Bucket), g.clock.now()); banned == cacheHit {
				g.bans.refusedCounter(req.Bucket.Policy).Add(1)
				out[i].Decision = ban
				continue
			}
		}
		// A slot this enforcer is about to give back goes to this request.
		if req.Algorithm == Concurrency && banned == cacheMiss {
			if d, ok := g.slots.reuse(req, now); ok {
				out[i].Decision = d
				continue
			}
		}
		var a localAnswer
		// A ban due for its check asks Redis whatever a lease holds.
		if req.f.lease && banned == cacheMiss {
			// Waiting once this batch has calls in flight could wait for
			// one of them: a bucket twice in one batch.
			if a = g.answer(ctx, req, len(pending) == 0); a.local {
				out[i].Decision = a.decision
				continue
			}
		} else {
			a.want = req.Cost
		}
		if !skipKnown {
			skip, skipKnown = g.skipping(), true
		}
		if skip {
			if a.owner {
				g.leases.unfetch(a.entry, false)
			}
			if banned == cacheRecheck {
				out[i].Decision = ban
				continue
			}
			out[i].Decision, out[i].Err = g.fallback(req), ErrRedisUnavailable
			continue
		}
		g.leases.counts(req.Bucket.Policy).RedisCalls.Add(1)
		pending = append(pending, guardCheck{i: i, entry: a.entry, owner: a.owner, sent: g.clock.now(),
			ban: ban, banned: banned == cacheRecheck, check: g.redis.submit(ctx, req, req.Cost, a.want)})
	}
	// Rules of one policy share its timeout: one deadline serves them all.
	var deadlines budgets
	defer deadlines.cancel()
	for _, p := range pending {
		req := &reqs[p.i]
		deadline := deadlines.get(ctx, now.Add(req.Failure.timeout()))
		d, taken, err := p.check.wait(deadline)
		if err == nil && p.entry != nil {
			g.leases.settle(p.entry, req, d, taken, req.Cost, p.sent, p.owner)
		} else if p.owner {
			g.leases.unfetch(p.entry, p.check.want > req.Cost)
		}
		if err == nil && req.f.ban != nil {
			g.observeBan(req, d, p.sent)
		}
		d, err = g.settle(ctx, req, d, err)
		if err != nil && p.banned {
			// Redis could not say whether the ban still holds: it does.
			d, err = p.ban, nil
		}
		out[p.i].Decision, out[p.i].Err = d, err
	}
	return out
}

// guardCheck is a rule of Decide sent to Redis: its index, its bucket's
// lease entry, whether it is the bucket's call in flight, and when it was
// sent (the Guard's clock).
type guardCheck struct {
	i     int
	check pendingCheck
	entry *leaseEntry
	owner bool
	sent  int64
	// ban is the tenant's cached ban when banned is set: this call checks
	// that it still holds.
	ban    Decision
	banned bool
}

// waitsForCall is how often a request waits for another's call to its
// bucket before asking Redis itself.
const waitsForCall = 1

// answer asks the lease table about req, waiting (when it may) for the
// bucket's call in flight when there is one: once, for at most half of
// req's timeout, so that its own call keeps the other half. It starts the
// prefetch of the next lease when the answer asks for one.
func (g *Guard) answer(ctx context.Context, req *Request, mayWait bool) localAnswer {
	for waited := 0; ; waited++ {
		a := g.leases.answer(req, waited == 0, mayWait && waited < waitsForCall)
		if a.prefetch > 0 {
			g.startPrefetch(a.entry, a.prefetch)
		}
		if a.wait == nil {
			return a
		}
		timer := time.NewTimer(req.Failure.timeout() / 2)
		select {
		case <-a.wait:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
}

// startPrefetch asks for the next lease of e's bucket in the background,
// unless the guard is closing.
func (g *Guard) startPrefetch(e *leaseEntry, want int64) {
	g.prefetchMu.Lock()
	defer g.prefetchMu.Unlock()
	if g.closing {
		g.leases.unfetch(e, false)
		return
	}
	g.prefetches.Go(func() { g.prefetch(e, want) })
}

// prefetch asks Redis for the next lease of e's bucket, want units, while
// the current one still serves.
func (g *Guard) prefetch(e *leaseEntry, want int64) {
	// Only a lease prefetches: e has its grant, whose req is never changed.
	req := &e.grant.req
	ctx, cancel := context.WithTimeout(context.Background(), req.Failure.timeout())
	defer cancel()
	sent := g.clock.now()
	g.leases.counts(req.Bucket.Policy).RedisCalls.Add(1)
	d, taken, err := g.redis.submit(ctx, req, 0, want).wait(ctx)
	if err != nil {
		g.leases.unfetch(e, true)
		g.failed(err)
		return
	}
	g.succeeded()
	if req.f.ban != nil {
		g.observeBan(req, d, sent)
	}
	g.leases.settle(e, req, d, taken, 0, sent, true)
}

// budgets hands out one deadline context per distinct deadline of a batch.
type budgets struct {
	at    time.Time
	ctx   context.Context
	first context.CancelFunc   // the usual case: one policy, one deadline
	more  []context.CancelFunc // rules of policies with other timeouts
}

func (b *budgets) get(parent context.Context, at time.Time) context.Context {
	if b.ctx == nil || !at.Equal(b.at) {
		ctx, cancel := context.WithDeadline(parent, at)
		b.at, b.ctx = at, ctx
		if b.first == nil {
			b.first = cancel
		} else {
			b.more = append(b.more, cancel)
		}
	}
	return b.ctx
}

func (b *budgets) cancel() {
	if b.first != nil {
		b.first()
	}
	for _, c := range b.more {
		c()
	}
}
