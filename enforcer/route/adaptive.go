package route

import (
	"fmt"
	"sync/atomic"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// adaptiveRule is the adaptive state of a rule: its settings, the meter of
// its responses on this enforcer, and its limiter rules scaled by the
// factor in force. A factor change builds new limiter rules (new windows),
// off the request path; leases and cached refusals are kept per set of
// windows, so none taken under the old limits admits under the new ones.
type adaptiveRule struct {
	settings config.Adaptive
	bucket   limiter.Bucket
	meter    *limiter.Meter
	// scaled is nil while the factor is 100%.
	scaled atomic.Pointer[scaledRules]
	factor atomic.Int64
	// the configuration's own windows, to scale from
	cfg *config.Rule
	b   bucketOf
}

type scaledRules struct {
	limits    limiter.Rule
	perTier   map[string]limiter.Rule
	overrides map[string]limiter.Rule
}

func newAdaptiveRule(b bucketOf, cr *config.Rule) *adaptiveRule {
	a := &adaptiveRule{settings: *cr.Adaptive, cfg: cr, b: b, meter: limiter.NewMeter(cr.Adaptive),
		bucket: limiter.Bucket{Namespace: b.namespace, Policy: b.policy, Rule: cr.Name}}
	a.factor.Store(int64(config.Full))
	return a
}

// Adaptive is the rule's adaptive settings, nil for a rule without.
func (r *Rule) Adaptive() *config.Adaptive {
	if r.adaptive == nil {
		return nil
	}
	return &r.adaptive.settings
}

// Meter measures the responses to the rule's requests; nil for a rule
// that is not adaptive.
func (r *Rule) Meter() *limiter.Meter {
	if r.adaptive == nil {
		return nil
	}
	return r.adaptive.meter
}

// AdaptiveBucket names the rule's shared adaptive state (no tenant).
func (r *Rule) AdaptiveBucket() limiter.Bucket {
	if r.adaptive == nil {
		return limiter.Bucket{}
	}
	return r.adaptive.bucket
}

// Factor is the share of the configured limits the rule applies now:
// config.Full for a rule that is not adaptive.
func (r *Rule) Factor() config.BasisPoints {
	if r.adaptive == nil {
		return config.Full
	}
	return config.BasisPoints(r.adaptive.factor.Load())
}

// Adopt carries the adaptive state of old, the same rule in the
// configuration before, into r: the factor in force and, when the targets
// did not change, the measurements not yet sent. Call it before r's table
// is put into service.
func (r *Rule) Adopt(old *Rule) error {
	if r.adaptive == nil || old == nil || old.adaptive == nil {
		return nil
	}
	if old.adaptive.settings.Latency == r.adaptive.settings.Latency {
		r.adaptive.meter = old.adaptive.meter
	}
	return r.SetFactor(old.Factor())
}

// SetFactor puts factor (clamped to the rule's minimum and 100%) in force
// for the rule's next decisions; it is a no-op for a rule that is not
// adaptive, or when the factor does not change.
func (r *Rule) SetFactor(factor config.BasisPoints) error {
	a := r.adaptive
	if a == nil {
		return nil
	}
	factor = min(config.Full, max(a.settings.Minimum, factor))
	if config.BasisPoints(a.factor.Load()) == factor {
		return nil
	}
	if factor == config.Full {
		a.scaled.Store(nil)
		a.factor.Store(int64(factor))
		return nil
	}
	s := &scaledRules{}
	var err error
	if s.limits, err = a.scale(a.cfg.Limits, r, factor); err != nil {
		return err
	}
	if len(a.cfg.TierLimits) > 0 {
		s.perTier = make(map[string]limiter.Rule, len(a.cfg.TierLimits))
		for tier, limits := range a.cfg.TierLimits {
			if s.perTier[tier], err = a.scale(limits, r, factor); err != nil {
				return err
			}
		}
	}
	if len(r.overrides) > 0 {
		s.overrides = make(map[string]limiter.Rule, len(r.overrides))
		for _, o := range a.cfg.Overrides {
			w, err := a.scale(o.Limits, r, factor)
			if err != nil {
				return err
			}
			addOverride(s.overrides, o.Tenant, w)
		}
	}
	a.scaled.Store(s)
	a.factor.Store(int64(factor))
	return nil
}

func (a *adaptiveRule) scale(limits []config.Limit, r *Rule, factor config.BasisPoints) (limiter.Rule, error) {
	ws := make([]limiter.Window, len(limits))
	for i, l := range limits {
		ws[i] = limiter.Window{Requests: l.Requests, Period: l.Period.Duration, Burst: l.Burst}
	}
	ws = limiter.ScaleWindows(r.Algorithm, ws, r.Cost, factor)
	rule, err := limiter.NewRule(limiter.Bucket{Namespace: a.b.namespace, Policy: a.b.policy, Rule: r.Name},
		r.Algorithm, ws, r.Cost, a.b.failure, limiter.Leasing(r.Leasing))
	if err != nil {
		return limiter.Rule{}, fmt.Errorf("rule %s at %s: %w", r.Name, factor, err)
	}
	return rule, nil
}

// scaledWindows are the windows the factor in force gives the rule for a
// tenant of a tier, when it is below 100%.
func (r *Rule) scaledWindows(tier, tenant string) (limiter.Rule, bool, bool) {
	s := r.adaptive.scaled.Load()
	if s == nil {
		return limiter.Rule{}, false, false
	}
	if w, ok := s.overrides[tenant]; ok {
		return w, true, true
	}
	if w, ok := s.perTier[tier]; ok {
		return w, false, true
	}
	return s.limits, false, true
}

// Windows are the windows the rule applies now to requests without a tier
// or override: the configured ones scaled by the factor in force.
func (r *Rule) Windows() []limiter.Window {
	if r.adaptive != nil {
		if w, _, ok := r.scaledWindows("", ""); ok {
			return w.Windows()
		}
	}
	return r.limits.Windows()
}

// ConfiguredWindows are the rule's untiered windows as configured.
func (r *Rule) ConfiguredWindows() []limiter.Window { return r.limits.Windows() }
