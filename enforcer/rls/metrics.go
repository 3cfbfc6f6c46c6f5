package rls

import (
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
)

// The outcomes of one descriptor, the outcome label of
// sluice_ratelimit_descriptors_total.
const (
	outcomeAllowed   = "allowed"
	outcomeOverLimit = "over_limit"
	// outcomeShadowOverLimit is a refusal a shadow_mode rule (or a DryRun
	// domain) answered OK.
	outcomeShadowOverLimit = "shadow_over_limit"
	outcomeUnlimited       = "unlimited"
	outcomeReplaced        = "replaced"
	outcomeNoRule          = "no_rule"
)

// Metrics are the service's counters. Labels hold only configured
// domains and rule names: a domain no policy has is counted as "".
type Metrics struct {
	calls       *prometheus.CounterVec
	descriptors *prometheus.CounterVec
	degradedN   prometheus.Counter
	refunds     prometheus.Counter
}

// NewMetrics registers the service's counters with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_ratelimit_calls_total",
			Help: "ShouldRateLimit calls answered, by overall code (OK, OVER_LIMIT).",
		}, []string{"code"}),
		descriptors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_ratelimit_descriptors_total",
			Help: "Descriptors decided, by domain, rule and outcome (allowed, over_limit, shadow_over_limit: refused by a shadow_mode rule but answered OK, unlimited, replaced, no_rule).",
		}, []string{"domain", "rule", "outcome"}),
		degradedN: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_ratelimit_degraded_total",
			Help: "Descriptors decided by their domain's failure mode because Redis did not answer in time.",
		}),
		refunds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_ratelimit_refund_errors_total",
			Help: "Refused calls whose admitted descriptors could not be given back to Redis.",
		}),
	}
	reg.MustRegister(m.calls, m.descriptors, m.degradedN, m.refunds)
	return m
}

func (m *Metrics) call(code ratelimitv3.RateLimitResponse_Code) {
	if m != nil {
		m.calls.WithLabelValues(code.String()).Inc()
	}
}

// descriptor counts one descriptor; domain is "" for a domain the table
// does not have, possibly a client's invention.
func (m *Metrics) descriptor(domain string, r *Rule, outcome string) {
	if m == nil {
		return
	}
	rule := ""
	if r != nil {
		rule = r.Name
	}
	m.descriptors.WithLabelValues(domain, rule, outcome).Inc()
}

func (m *Metrics) degraded() {
	if m != nil {
		m.degradedN.Inc()
	}
}

func (m *Metrics) refundFailed() {
	if m != nil {
		m.refunds.Inc()
	}
}
