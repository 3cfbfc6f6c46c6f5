package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// responseMetrics are the metrics of responseCost and countResponses:
// Metrics implements engine.ResponseRecorder with them.
type responseMetrics struct {
	charged   *prometheus.CounterVec
	invalid   *prometheus.CounterVec
	uncounted *prometheus.CounterVec
}

func newResponseMetrics(reg prometheus.Registerer) *responseMetrics {
	f := promauto.With(reg)
	m := &responseMetrics{
		charged: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_enforcer_response_charged_units_total",
			Help: "Units the answers of responseCost rules reported, cost included, by policy and rule.",
		}, []string{"policy", "rule"}),
		invalid: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_enforcer_response_reports_invalid_total",
			Help: "Answers of responseCost rules whose report was not taken, by policy, rule and reason: missing, malformed, negative (the rule's cost was charged), too_large, encoding (neither identity nor gzip), unfinished (ended before its report; these three were charged the rule's unfinishedCost).",
		}, []string{"policy", "rule", "reason"}),
		uncounted: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_enforcer_responses_uncounted_total",
			Help: "Requests of countResponses rules given back because their answer matched none of the statuses, by policy and rule.",
		}, []string{"policy", "rule"}),
	}
	return m
}

// ResponseCharged records the units an answer reported.
func (m *Metrics) ResponseCharged(p *rules.Policy, r *rules.Rule, units int64) {
	m.response.charged.WithLabelValues(p.Name, r.Name).Add(float64(units))
}

// ResponseReportInvalid records a report that was not taken.
func (m *Metrics) ResponseReportInvalid(p *rules.Policy, r *rules.Rule, reason string) {
	m.response.invalid.WithLabelValues(p.Name, r.Name, reason).Inc()
}

// ResponseUncounted records a request given back for its answer.
func (m *Metrics) ResponseUncounted(p *rules.Policy, r *rules.Rule) {
	m.response.uncounted.WithLabelValues(p.Name, r.Name).Inc()
}

var _ engine.ResponseRecorder = (*Metrics)(nil)
