package rules

import (
	"fmt"
	"sync/atomic"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// Scaling is the adaptive state of one rule on this enforcer, kept apart
// from the rule, which never changes: the meter of its responses, the
// factor in force and the limiter rules scaled by it. A factor change
// builds new limiter rules (new windows), off the request path; leases and
// cached refusals are kept per set of windows, so none taken under the old
// limits admits under the new ones. A Table holds one per adaptive rule
// (Table.Scaling); its methods on nil, but Windows, are those of a rule
// that is not adaptive.
type Scaling struct {
	rule   *Rule
	b      bucketOf
	bucket limiter.Bucket
	meter  *limiter.Meter
	// scaled is nil while the factor is 100%.
	scaled atomic.Pointer[scaledRules]
	factor atomic.Int64
}

type scaledRules struct {
	limits    limiter.Rule
	perTier   map[string]limiter.Rule
	overrides map[string]limiter.Rule
}

func newScaling(b bucketOf, r *Rule) *Scaling {
	s := &Scaling{rule: r, b: b, meter: limiter.NewMeter(r.Adaptive),
		bucket: limiter.Bucket{Namespace: b.namespace, Policy: b.policy, Rule: r.Name}}
	s.factor.Store(int64(config.Full))
	return s
}

// Scaling is the adaptive state of r, a rule of t; nil when r is not
// adaptive.
func (t *Table) Scaling(r *Rule) *Scaling {
	if t == nil || r.scaling == 0 {
		return nil
	}
	return t.scaling[r.scaling-1]
}

// Adaptive is the rule's adaptive settings, nil for a rule without.
func (s *Scaling) Adaptive() *config.Adaptive {
	if s == nil {
		return nil
	}
	return s.rule.Adaptive
}

// Meter measures the responses to the rule's requests; nil for a rule
// that is not adaptive.
func (s *Scaling) Meter() *limiter.Meter {
	if s == nil {
		return nil
	}
	return s.meter
}

// AdaptiveBucket names the rule's shared adaptive state (no tenant).
func (s *Scaling) AdaptiveBucket() limiter.Bucket {
	if s == nil {
		return limiter.Bucket{}
	}
	return s.bucket
}

// Factor is the share of the configured limits the rule applies now:
// config.Full for a rule that is not adaptive.
func (s *Scaling) Factor() config.BasisPoints {
	if s == nil {
		return config.Full
	}
	return config.BasisPoints(s.factor.Load())
}

// Adopt carries old, the state of the same rule in the configuration
// before, into s: the factor in force and, when the targets did not
// change, the measurements not yet sent. Call it before s's table is put
// into service.
func (s *Scaling) Adopt(old *Scaling) error {
	if s == nil || old == nil {
		return nil
	}
	if old.rule.Adaptive.Latency == s.rule.Adaptive.Latency {
		s.meter = old.meter
	}
	return s.SetFactor(old.Factor())
}

// SetFactor puts factor (clamped to the rule's minimum and 100%) in force
// for the rule's next decisions; it is a no-op for a rule that is not
// adaptive, or when the factor does not change.
func (s *Scaling) SetFactor(factor config.BasisPoints) error {
	if s == nil {
		return nil
	}
	r := s.rule
	factor = min(config.Full, max(r.Adaptive.Minimum, factor))
	if config.BasisPoints(s.factor.Load()) == factor {
		return nil
	}
	if factor == config.Full {
		s.scaled.Store(nil)
		s.factor.Store(int64(factor))
		return nil
	}
	scaled := &scaledRules{}
	var err error
	if scaled.limits, err = s.scale(r.Limits, factor); err != nil {
		return err
	}
	if len(r.TierLimits) > 0 {
		scaled.perTier = make(map[string]limiter.Rule, len(r.TierLimits))
		for tier, limits := range r.TierLimits {
			if scaled.perTier[tier], err = s.scale(limits, factor); err != nil {
				return err
			}
		}
	}
	if len(r.Overrides) > 0 {
		scaled.overrides = make(map[string]limiter.Rule, len(r.Overrides))
		for _, o := range r.Overrides {
			w, err := s.scale(o.Limits, factor)
			if err != nil {
				return err
			}
			addOverride(scaled.overrides, o.Tenant, w)
		}
	}
	s.scaled.Store(scaled)
	s.factor.Store(int64(factor))
	return nil
}

func (s *Scaling) scale(limits []config.Limit, factor config.BasisPoints) (limiter.Rule, error) {
	rule, err := s.b.rule(limits, s.rule, factor)
	if err != nil {
		return limiter.Rule{}, fmt.Errorf("rule %s at %s: %w", s.rule.Name, factor, err)
	}
	return rule, nil
}

// scaledWindows are the windows the factor in force gives the rule for a
// tenant of a tier, when it is below 100%.
func (s *Scaling) scaledWindows(tier, tenant string) (limiter.Rule, bool, bool) {
	scaled := s.scaled.Load()
	if scaled == nil {
		return limiter.Rule{}, false, false
	}
	if w, ok := scaled.overrides[tenant]; ok {
		return w, true, true
	}
	if w, ok := scaled.perTier[tier]; ok {
		return w, false, true
	}
	return scaled.limits, false, true
}

// Windows are the windows the rule applies now to requests without a tier
// or override: the configured ones scaled by the factor in force.
func (s *Scaling) Windows() []limiter.Window {
	if w, _, ok := s.scaledWindows("", ""); ok {
		return w.Windows()
	}
	return s.rule.ConfiguredWindows()
}

// ConfiguredWindows are the rule's untiered windows as configured.
func (r *Rule) ConfiguredWindows() []limiter.Window { return r.limits.Windows() }
