package admin

import (
	"github.com/sluice-dev/sluice/enforcer/adaptive"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/metrics"
	"github.com/sluice-dev/sluice/enforcer/status"
)

// AdaptiveSource gives the adaptive rules' state (an *adaptive.Controller).
type AdaptiveSource interface {
	Reports() []adaptive.Report
}

// addAdaptive puts the adaptive rules' state into the policies of doc.
func (s *Server) addAdaptive(doc *status.Document) {
	if s.opts.Adaptive == nil {
		return
	}
	for _, r := range s.opts.Adaptive.Reports() {
		for i := range doc.Policies {
			p := &doc.Policies[i]
			if p.Name != r.Policy {
				continue
			}
			a := status.AdaptiveRule{Rule: r.Rule, Factor: int64(r.State.Factor), Minimum: int64(r.Settings.Minimum),
				P90Seconds: r.State.P90.Seconds(), ErrorRate: r.State.ErrorRate(), Responses: r.State.Responses}
			for _, w := range r.Effective {
				a.Limits = append(a.Limits, status.AdaptiveLimit{Requests: w.Requests, Period: metrics.WindowLabel(w), Burst: w.Burst})
			}
			if !r.Updated.IsZero() {
				at := r.Updated.UTC()
				a.UpdatedAt = &at
			}
			if r.Err != nil {
				a.LastError = r.Err.Error()
			}
			p.Adaptive = append(p.Adaptive, a)
		}
	}
}

// tenantAdaptive is the adaptive state of rule (policy/rule) for
// /debug/tenant, nil when the rule is not adaptive.
func (s *Server) tenantAdaptive(policy, rule string) *debugapi.TenantAdaptive {
	if s.opts.Adaptive == nil {
		return nil
	}
	for _, r := range s.opts.Adaptive.Reports() {
		if r.Policy == policy && r.Rule == rule {
			return &debugapi.TenantAdaptive{Factor: r.State.Factor.String(), Configured: limits(r.Configured)}
		}
	}
	return nil
}

func limits(ws []limiter.Window) []config.Limit {
	out := make([]config.Limit, len(ws))
	for i, w := range ws {
		out[i] = config.Limit{Requests: w.Requests, Period: config.Duration{Duration: w.Period}, Burst: w.Burst, Calendar: w.Calendar}
	}
	return out
}
