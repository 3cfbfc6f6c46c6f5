package proxy

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// decide asks each Redis about the checks of its policies, in one round
// trip per Redis (engine.Batch); a Redis that fails leaves each of its
// checks to its policy's failure mode.
func (h *Handler) decide(x *exchange) bool {
	if len(x.checks) == 0 {
		return true
	}
	x.ctx = context.WithoutCancel(x.r.Context())
	snap := x.snap.Snapshot
	for i := range x.checks {
		x.batch.Add(snap.BackendOf(x.checks[i].Policy).Guard, x.checks[i].Request)
	}
	x.batch.Decide(x.ctx, func(g *limiter.Guard, took time.Duration) {
		for _, be := range snap.Backends() {
			if be.Guard == g {
				h.rec.RedisRoundTrip(be, took)
				return
			}
		}
	})
	return true
}

// judge finds the verdict and settles it: a refused request takes
// nothing from any check (its other checks' takings are given back), an
// admitted one holds its slots until it ends. Then the response gets its
// rate limit headers and the decision its metrics.
func (h *Handler) judge(x *exchange) bool {
	if len(x.checks) == 0 {
		return true
	}
	x.refusing, x.wouldDeny = h.evaluate(x)
	if x.refusing >= 0 {
		x.batch.Refuse(x.ctx)
	} else {
		x.batch.Admit()
	}
	hdr := x.w.Header()
	x.buf = writeLimitHeaders(hdr, x.checks, x.batch.Admissions, x.refusing, x.buf)
	if x.wouldDeny {
		x.buf = writeWouldDeny(hdr, x.checks, x.batch.Admissions, x.buf)
	}
	h.record(x)
	return true
}

// refuse answers a refused request: 429 naming the rule that refused it
// (the Enforce check with the longest wait), 503 when a fail-closed
// policy could not decide.
func (h *Handler) refuse(x *exchange) bool {
	if len(x.checks) == 0 || x.refusing < 0 {
		return true
	}
	i := x.refusing
	p := refusal(&x.checks[i], &x.batch.Admissions[i].Decision)
	queueFullDetail(x, i, p)
	h.dequeue(x, false)
	writeProblem(x.w, x.r, p)
	return false
}

// evaluate finds the check that refuses the request (the Enforce check with
// the longest wait), or -1, and whether a DryRun check would have.
func (h *Handler) evaluate(x *exchange) (refusing int, wouldDeny bool) {
	refusing = -1
	outs := x.batch.Admissions
	for i := range x.checks {
		o := &outs[i]
		if o.Err != nil && !o.Decision.Degraded {
			h.rec.CheckError(x.checks[i].Policy, o.Err)
			continue
		}
		if !engine.Refuses(o) {
			continue
		}
		if x.checks[i].Policy.DryRun {
			wouldDeny = true
		} else if refusing < 0 || o.Decision.RetryAfter > outs[refusing].Decision.RetryAfter {
			refusing = i
		}
	}
	return refusing, wouldDeny
}

// record reports each rule's and each policy's verdict.
func (h *Handler) record(x *exchange) {
	policyVerdict := engine.Allowed
	for i := range x.checks {
		c, o := &x.checks[i], &x.batch.Admissions[i]
		v := engine.Allowed
		if engine.Refuses(o) {
			v = engine.Denied
			if o.Decision.Ban.Active() {
				v = engine.Banned
			}
			if c.Policy.DryRun {
				v = engine.WouldDeny
			}
		}
		if o.Decision.Degraded {
			h.rec.Degraded(c.Policy)
		}
		h.rec.Check(c.Policy, c.Rule, c.Tier, v)
		if tr, ok := h.rec.(engine.TenantRecorder); ok {
			tr.Tenant(c.Policy, c.Rule, c.Tenant, v)
		}
		policyVerdict = max(policyVerdict, v)
		// Checks come grouped by policy: close the group at its last check.
		if i == len(x.checks)-1 || x.checks[i+1].Policy != c.Policy {
			h.rec.Policy(c.Policy, policyVerdict)
			policyVerdict = engine.Allowed
		}
	}
}
