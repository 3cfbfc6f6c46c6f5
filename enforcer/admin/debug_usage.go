package admin

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// peekTimeout bounds each Redis read of a /debug/tenant answer.
const peekTimeout = time.Second

// TenantUsage is the state of one tenant's bucket under one rule, read
// without consuming anything, as the proxy would decide a request of the
// tenant now.
type TenantUsage struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	// Tier is the tier the request resolves to, and TierReason how: from
	// which header or claim, or the policy's default and why.
	Tier       string `json:"tier,omitempty"`
	TierReason string `json:"tierReason,omitempty"`
	Algorithm  string `json:"algorithm"`
	// Cost is what one request takes from every window.
	Cost int64 `json:"cost"`
	// Override is set when the tenant has limits of its own.
	Override bool `json:"override"`
	// DryRun is set for a policy in DryRun mode: it never refuses, a
	// refusal of its rule is counted as would-deny.
	DryRun bool `json:"dryRun,omitempty"`
	// Windows are the rule's windows for the tenant, each with its state.
	Windows []WindowUsage `json:"windows"`
	// Allowed says whether one more request would be admitted now (after
	// waiting DelaySeconds, for a rule with onLimit.delay); a banned
	// tenant is not.
	Allowed bool `json:"allowed"`
	// Limit, Remaining and Reset describe the deciding window, as the
	// X-RateLimit-* headers would: the refusing window with the longest
	// wait, else the one with the fewest requests remaining.
	Limit     int64     `json:"limit"`
	Remaining int64     `json:"remaining"`
	Reset     time.Time `json:"reset"`
	// RetryAfterSeconds is present when the rule would refuse: the
	// Retry-After its 429 would carry (whole seconds, rounded up, at
	// least 1), a ban's end included.
	RetryAfterSeconds int64 `json:"retryAfterSeconds,omitempty"`
	// DelaySeconds is how long an admitted request would wait for the
	// capacity it books (onLimit.delay), absent when it goes on at once.
	DelaySeconds float64 `json:"delaySeconds,omitempty"`
	// Reservations are the rule's onLimit.delay bookings (delay_debug.go),
	// omitted for rules without a delay.
	Reservations *Reservations `json:"reservations,omitempty"`
	// Ban is the tenant's ban state, for a rule with a ban.
	Ban *TenantBan `json:"ban,omitempty"`
	// Slots are, for a Concurrency rule, the enforcers holding the
	// tenant's slots, by name (debug_slots.go).
	Slots []limiter.Holder `json:"slots,omitempty"`
	// Adaptive is set for an adaptive rule: the factor that scaled Windows.
	Adaptive *TenantAdaptive `json:"adaptive,omitempty"`
	// Error says why the bucket could not be read, in a TenantReport.
	Error string `json:"error,omitempty"`

	// retryAfter is the unrounded wait, to pick the rule a 429 names.
	retryAfter time.Duration
}

// WindowUsage is one window of a rule and its state for the tenant.
type WindowUsage struct {
	config.Limit
	// Capacity ("limit") is the most the window admits at once (a token
	// bucket's burst), Remaining what it admits now and Reset when it is
	// whole again.
	Capacity  int64     `json:"limit"`
	Remaining int64     `json:"remaining"`
	Reset     time.Time `json:"reset"`
	// Refusing says this window alone would refuse the request now.
	Refusing bool `json:"refusing,omitempty"`
	// Current is, for a calendar window, the window that holds now on
	// Redis' clock, in its zone (calendar_debug.go).
	Current *CalendarWindow `json:"current,omitempty"`
	// Debt is how far below empty the costs its answers reported took
	// the window (responseCost rules), which it pays before it admits.
	Debt int64 `json:"debt,omitempty"`
}

// tenantUsage reads m's bucket. The usage carries the rule's names and
// windows even when Redis could not be read.
func (s *Server) tenantUsage(ctx context.Context, snap *engine.Snapshot, m *rules.TenantMatch) (TenantUsage, error) {
	req := m.Request
	if m.Policy.DryRun {
		req = req.WithoutDelay() // DryRun policies never hold a request
	}
	usage := TenantUsage{Policy: m.Policy.Name, Rule: m.Rule.Name, Tier: m.Tier, TierReason: tierReason(m),
		Algorithm: string(req.Algorithm), Cost: req.Cost, Override: m.Override, DryRun: m.Policy.DryRun}
	usage.Adaptive = s.tenantAdaptive(m.Policy.Name, m.Rule.Name)
	for _, win := range req.Windows {
		usage.Windows = append(usage.Windows, WindowUsage{Limit: WindowLimit(req.Algorithm, win)})
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
		usage.retryAfter = d.RetryAfter
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
