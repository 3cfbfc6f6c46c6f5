package admin

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// peekTimeout bounds each Redis read of a /debug/tenant answer.
const peekTimeout = time.Second

// tenantUsage reads m's bucket. The usage carries the rule's names and
// windows even when Redis could not be read.
func (s *Server) tenantUsage(ctx context.Context, snap *engine.Snapshot, m *rules.TenantMatch) (debugapi.TenantUsage, error) {
	req := m.Request
	if m.Policy.DryRun {
		req = req.WithoutDelay() // DryRun policies never hold a request
	}
	usage := debugapi.TenantUsage{Policy: m.Policy.Name, Rule: m.Rule.Name, Tier: m.Tier, TierReason: tierReason(m),
		Algorithm: string(req.Algorithm), Cost: req.Cost, Override: m.Override, DryRun: m.Policy.DryRun}
	usage.Adaptive = s.tenantAdaptive(m.Policy.Name, m.Rule.Name)
	for _, win := range req.Windows {
		usage.Windows = append(usage.Windows, debugapi.WindowUsage{Limit: WindowLimit(req.Algorithm, win)})
	}
	be := snap.BackendOf(m.Policy)
	d, err := be.Peek(ctx, req, peekTimeout)
	if err != nil {
		return usage, err
	}
	for i := range req.Windows {
		alone := req.WithoutDelay()
		alone.Windows = req.Windows[i : i+1]
		wd, err := be.Peek(ctx, alone, peekTimeout)
		if err != nil {
			return usage, err
		}
		w := &usage.Windows[i]
		w.Capacity, w.Remaining, w.Reset, w.Refusing, w.Debt = wd.Limit, wd.Remaining, wd.Reset, !wd.Allowed, wd.Debt
		w.Current = calendarWindowAt(req.Windows[i], wd.Now)
	}
	dw := req.Windows[d.Window] // as the limiter counts it, whatever the view shows
	usage.Reservations = s.reservationsOf(req, d, limitOf(dw.Requests, dw.Period, dw.Burst))
	if req.Ban != nil {
		if usage.Ban, err = tenantBan(ctx, be, req); err != nil {
			return usage, err
		}
		if usage.Ban.Banned {
			banned(&d, req, *usage.Ban.Until)
		}
	}
	usage.Allowed, usage.Limit, usage.Remaining, usage.Reset = d.Allowed, d.Limit, d.Remaining, d.Reset
	if d.Allowed {
		usage.DelaySeconds = d.Delay.Seconds()
	} else {
		usage.RetryAfter = d.RetryAfter
		usage.RetryAfterSeconds = retryAfterSeconds(d.RetryAfter)
	}
	return usage, tenantSlots(ctx, be, &req, &usage)
}

// banned makes d the decision of a tenant banned until, as the limiter
// answers one without running the rule's algorithm: refused until then,
// described by the first window.
func banned(d *limiter.Decision, req limiter.Request, until time.Time) {
	d.Allowed, d.Window, d.Remaining, d.Delay = false, 0, 0, 0
	d.Limit = req.Algorithm.Capacity(limitOf(req.Windows[0].Requests, req.Windows[0].Period, req.Windows[0].Burst))
	d.RetryAfter, d.Reset = until.Sub(d.Now), until
}

// retryAfterSeconds is the Retry-After of a refusal that waits wait, as
// the proxy writes it: whole seconds rounded up, at least 1, so that a
// client waiting that long finds the request admitted.
func retryAfterSeconds(wait time.Duration) int64 {
	return max(int64((wait+time.Second-1)/time.Second), 1)
}
