package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// delayMetrics are the metrics of onLimit.delay: Metrics implements
// engine.DelayRecorder with them.
type delayMetrics struct {
	delayed   *prometheus.CounterVec
	wait      *prometheus.HistogramVec
	queue     prometheus.Gauge
	full      *prometheus.CounterVec
	cancelled *prometheus.CounterVec
}

func newDelayMetrics(reg prometheus.Registerer) *delayMetrics {
	f := promauto.With(reg)
	m := &delayMetrics{
		delayed: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_enforcer_delayed_requests_total",
			Help: "Requests over a limit that waited for capacity booked in Redis (onLimit.delay) and then went on, by policy and rule.",
		}, []string{"policy", "rule"}),
		wait: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_enforcer_delay_wait_seconds",
			Help:    "How long delayed requests waited for their reservation, by policy and rule.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"policy", "rule"}),
		queue: f.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_enforcer_delay_queue_length",
			Help: "Requests of onLimit.delay rules holding a place in this enforcer's wait queue (being decided or waiting); at most --delay-max-queued.",
		}),
		full: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_enforcer_delay_queue_full_total",
			Help: "Requests decided without their delay because a wait queue was full, by policy, rule and scope (tenant: the rule's maxQueued; enforcer: --delay-max-queued).",
		}, []string{"policy", "rule", "scope"}),
		cancelled: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_enforcer_delay_cancelled_total",
			Help: "Waits that ended before their slot because the client hung up or a gRPC deadline came first; their reservations were given back. By policy and rule.",
		}, []string{"policy", "rule"}),
	}
	return m
}

// Delayed records a request that waited wait for its reservation.
func (m *Metrics) Delayed(p *rules.Policy, r *rules.Rule, wait time.Duration) {
	m.delay.delayed.WithLabelValues(p.Name, r.Name).Inc()
	m.delay.wait.WithLabelValues(p.Name, r.Name).Observe(wait.Seconds())
}

// DelayCancelled records a wait given up before its slot.
func (m *Metrics) DelayCancelled(p *rules.Policy, r *rules.Rule) {
	m.delay.cancelled.WithLabelValues(p.Name, r.Name).Inc()
}

// DelayQueueFull records a request decided without its delay.
func (m *Metrics) DelayQueueFull(p *rules.Policy, r *rules.Rule, scope string) {
	m.delay.full.WithLabelValues(p.Name, r.Name, scope).Inc()
}

// DelayQueueLength records the places held in the wait queue.
func (m *Metrics) DelayQueueLength(n int) { m.delay.queue.Set(float64(n)) }

var _ engine.DelayRecorder = (*Metrics)(nil)
