package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/enforcer/adaptive"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/status"
)

// AdaptiveSource gives the adaptive rules' state (an *adaptive.Controller).
type AdaptiveSource interface {
	Reports() []adaptive.Report
}

// Adaptive limit metrics, read at each scrape.
var (
	effectiveLimit = prometheus.NewDesc("sluice_enforcer_effective_limit",
		"Requests per period an adaptive rule admits now (its untiered limits times the factor), by policy, rule and window (its period).",
		[]string{"policy", "rule", "window"}, nil)
	adaptiveFactor = prometheus.NewDesc("sluice_enforcer_adaptive_factor",
		"Share of an adaptive rule's configured limits in force (0..1), shared by every replica, by policy and rule.",
		[]string{"policy", "rule"}, nil)
	adaptiveLatency = prometheus.NewDesc("sluice_enforcer_adaptive_latency_p90_seconds",
		"p90 latency of an adaptive rule's responses in the last decided interval, across replicas (the upper bound of its histogram bucket), by policy and rule.",
		[]string{"policy", "rule"}, nil)
	adaptiveErrors = prometheus.NewDesc("sluice_enforcer_adaptive_error_ratio",
		"Share of 5xx responses of an adaptive rule in the last decided interval, across replicas, by policy and rule.",
		[]string{"policy", "rule"}, nil)
)

type adaptiveCollector func() []adaptive.Report

func (c adaptiveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{effectiveLimit, adaptiveFactor, adaptiveLatency, adaptiveErrors} {
		ch <- d
	}
}

func (c adaptiveCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, r := range c() {
		for _, w := range r.Effective {
			gauge(effectiveLimit, float64(w.Requests), r.Policy, r.Rule, windowLabel(w))
		}
		gauge(adaptiveFactor, float64(r.State.Factor)/float64(config.Full), r.Policy, r.Rule)
		gauge(adaptiveLatency, r.State.P90.Seconds(), r.Policy, r.Rule)
		gauge(adaptiveErrors, r.State.ErrorRate(), r.Policy, r.Rule)
	}
}

// WatchAdaptive reports the adaptive rules' factors and effective limits
// (sluice_enforcer_effective_limit and its companions). Call it once.
func (m *Metrics) WatchAdaptive(reports func() []adaptive.Report) {
	m.Registry.MustRegister(adaptiveCollector(reports))
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
				a.Limits = append(a.Limits, status.AdaptiveLimit{Requests: w.Requests, Period: windowLabel(w), Burst: w.Burst})
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

// TenantAdaptive is the adaptive state next to a tenant's bucket: the
// factor in force and the windows it scales.
type TenantAdaptive struct {
	// Factor is the share of the configured limits in force, as "70%".
	Factor string `json:"factor"`
	// Configured are the windows before scaling; TenantUsage.Windows are
	// the ones in force.
	Configured []config.Limit `json:"configured"`
}

// tenantAdaptive is the adaptive state of rule (policy/rule) for
// /debug/tenant, nil when the rule is not adaptive.
func (s *Server) tenantAdaptive(policy, rule string) *TenantAdaptive {
	if s.opts.Adaptive == nil {
		return nil
	}
	for _, r := range s.opts.Adaptive.Reports() {
		if r.Policy == policy && r.Rule == rule {
			return &TenantAdaptive{Factor: r.State.Factor.String(), Configured: limits(r.Configured)}
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
