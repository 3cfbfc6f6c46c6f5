// Package adaptive is the control loop of adaptive limits. On the request
// path the proxy times each request an adaptive rule admitted, from
// forwarding to the application's response head, and counts its status in
// the rule's meter; a Controller sends the meters to Redis a few times per
// interval and puts the shared factor it gets back into force. A new
// configuration carries factors and meters over (engine.Snapshot.Adopt),
// so that a reload neither lifts a tightened limit nor loses measurements.
package adaptive

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// flushes is how many times per interval each enforcer sends its
// measurements; the factor any replica sees lags the shared one by at most
// interval/flushes.
const flushes = 4

// stepTimeout bounds one rule's call to Redis.
const stepTimeout = time.Second

// Report is the adaptive state of one rule on this enforcer.
type Report struct {
	Policy, Rule string
	// Settings are the rule's adaptive settings.
	Settings config.Adaptive
	// Configured are the rule's untiered windows as configured, Effective
	// the ones in force.
	Configured, Effective []limiter.Window
	// State is the last answer from Redis; zero before the first.
	State limiter.AdaptiveState
	// Updated is when State arrived; zero before the first.
	Updated time.Time
	// Err is the last call's error, nil once one succeeds.
	Err error
}

// SnapshotSource gives the configuration in service (the proxy's handler).
type SnapshotSource interface {
	Snapshot() *engine.Snapshot
}

// Controller applies the adaptive rules of the configuration in service
// and reports their state. It is safe for concurrent use.
type Controller struct {
	snapshots SnapshotSource
	log       *slog.Logger

	mu sync.Mutex
	// reports are the rules' last answers, by policy/rule.
	reports map[string]*Report
}

// New is a Controller of the adaptive rules of the configuration that
// snapshots has in service; log receives factor changes and failures (nil
// logs nothing).
func New(snapshots SnapshotSource, log *slog.Logger) *Controller {
	return &Controller{snapshots: snapshots, log: log, reports: map[string]*Report{}}
}

func (c *Controller) report(policy, rule string) *Report {
	k := policy + "/" + rule
	r := c.reports[k]
	if r == nil {
		r = &Report{Policy: policy, Rule: rule}
		c.reports[k] = r
	}
	return r
}

// Reports are the adaptive rules of the configuration in service, with
// their factor and last measurements, sorted by policy and rule.
func (c *Controller) Reports() []Report {
	snap := c.snapshots.Snapshot()
	if snap == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Report
	for _, p := range snap.Table.Policies() {
		for _, r := range p.Rules {
			s := snap.Table.Scaling(r)
			a := s.Adaptive()
			if a == nil {
				continue
			}
			rep := *c.report(p.Name, r.Name)
			rep.Settings, rep.Effective = *a, s.Windows()
			rep.Configured = r.ConfiguredWindows()
			rep.State.Factor = s.Factor()
			out = append(out, rep)
		}
	}
	slices.SortFunc(out, func(a, b Report) int {
		if a.Policy != b.Policy {
			return strings.Compare(a.Policy, b.Policy)
		}
		return strings.Compare(a.Rule, b.Rule)
	})
	return out
}

// Run sends each adaptive rule's measurements to Redis flushes times per
// interval and applies the factor Redis returns, until ctx ends. A rule
// whose Redis cannot be reached keeps its factor: an outage neither lifts
// nor tightens its limits.
func (c *Controller) Run(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	next := map[string]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			c.round(ctx, now, next)
		}
	}
}

func (c *Controller) round(ctx context.Context, now time.Time, next map[string]time.Time) {
	snap := c.snapshots.Snapshot()
	if snap == nil {
		return
	}
	for _, p := range snap.Table.Policies() {
		be := snap.BackendOf(p)
		for _, r := range p.Rules {
			a := r.Adaptive
			if a == nil || be == nil {
				continue
			}
			k := p.Name + "/" + r.Name
			if now.Before(next[k]) {
				continue
			}
			next[k] = now.Add(a.Interval.Duration / flushes)
			c.step(ctx, be, snap.Table.Scaling(r))
		}
	}
}

// step sends r's measurements and applies the factor.
func (c *Controller) step(ctx context.Context, be *engine.Backend, r *rules.Scaling) {
	m := r.Meter()
	counts := m.Take()
	b := r.AdaptiveBucket()
	state, err := be.AdaptiveStep(ctx, b, r.Adaptive(), counts, stepTimeout)
	c.mu.Lock()
	rep := c.report(b.Policy, b.Rule)
	if err != nil {
		rep.Err = err
		c.mu.Unlock()
		m.Restore(counts)
		if c.log != nil {
			c.log.Warn("adaptive limits: keeping the factor in force", "policy", b.Policy, "rule", b.Rule, "error", err)
		}
		return
	}
	before := r.Factor()
	rep.State, rep.Updated, rep.Err = state, time.Now(), nil
	c.mu.Unlock()
	if err := r.SetFactor(state.Factor); err != nil && c.log != nil {
		c.log.Error("adaptive limits: cannot apply factor", "policy", b.Policy, "rule", b.Rule, "factor", state.Factor.String(), "error", err)
		return
	}
	if after := r.Factor(); after != before && c.log != nil {
		c.log.Info("adaptive limits: factor changed", "policy", b.Policy, "rule", b.Rule,
			"from", before.String(), "to", after.String(), "p90", state.P90.String(), "errorRate", state.ErrorRate())
	}
}
