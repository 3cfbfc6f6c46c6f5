package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/enforcer/adaptive"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

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
			gauge(effectiveLimit, float64(w.Requests), r.Policy, r.Rule, WindowLabel(w))
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

// WindowLabel names a window in metrics and status: its period ("1m0s"),
// or its calendar ("month@Europe/Berlin").
func WindowLabel(w limiter.Window) string {
	if w.Calendar != nil {
		return w.Calendar.Label()
	}
	return w.Period.String()
}
