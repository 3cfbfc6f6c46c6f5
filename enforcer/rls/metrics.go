package rls

import (
	"sync"
	"sync/atomic"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/sluice-dev/sluice/enforcer/limiter"
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

// nearLimitPercent is the share of a limit past which admitted hits are
// near the limit: envoyproxy/ratelimit's NEAR_LIMIT_RATIO default (0.8).
const nearLimitPercent = 80

// Metrics are the service's counters. Labels hold only configured
// domains, rule names and descriptor keys of the configuration: a domain
// no policy has is counted as "", and a request's values are never a
// label.
type Metrics struct {
	calls       *prometheus.CounterVec
	descriptors *prometheus.CounterVec
	degradedN   prometheus.Counter
	refunds     prometheus.Counter
	oversizedN  *prometheus.CounterVec

	// The per-key statistics of envoyproxy/ratelimit
	// (ratelimit.service.rate_limit.DOMAIN.KEY.*), counted in hits as it
	// counts them, by domain and key: the descriptor path of the
	// configuration ("tenant_acme.plan"), which is the rule's name.
	totalHits, overLimit, nearLimit, withinLimit, shadowMode *prometheus.CounterVec

	reg prometheus.Registerer
	// peeks are the Redis calls of hits_addend 0 checks, by domain: they
	// read Redis without the guard, which counts the others.
	peeks sync.Map // domain name -> *atomic.Int64
}

// NewMetrics registers the service's counters with reg; NewService adds
// the Redis calls and local decisions of its guard.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	byKey := func(name, help string) *prometheus.CounterVec {
		return f.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"domain", "key"})
	}
	m := &Metrics{
		calls: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_ratelimit_calls_total",
			Help: "ShouldRateLimit calls answered, by overall code (OK, OVER_LIMIT).",
		}, []string{"code"}),
		descriptors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_ratelimit_descriptors_total",
			Help: "Descriptors decided, by domain, rule and outcome (allowed, over_limit, shadow_over_limit: refused by a shadow_mode rule but answered OK, unlimited, replaced, no_rule).",
		}, []string{"domain", "rule", "outcome"}),
		degradedN: f.NewCounter(prometheus.CounterOpts{
			Name: "sluice_ratelimit_degraded_total",
			Help: "Descriptors decided by their domain's failure mode because Redis did not answer in time.",
		}),
		oversizedN: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_ratelimit_oversized_calls_total",
			Help: "ShouldRateLimit calls refused before any decision, by domain and bound: InvalidArgument for asking more than a bound allows (descriptors, entries, entry_bytes, call_bytes), ResourceExhausted for a large call that waited in vain for other large calls (large_calls_in_flight).",
		}, []string{"domain", "bound"}),
		refunds: f.NewCounter(prometheus.CounterOpts{
			Name: "sluice_ratelimit_refund_errors_total",
			Help: "Refused calls whose admitted descriptors could not be given back to Redis.",
		}),
		totalHits: byKey("sluice_ratelimit_total_hits_total",
			"Hits asked of a limit (envoyproxy/ratelimit's total_hits), by domain and descriptor key of the configuration; unlimited, replaced and unmatched descriptors are not counted."),
		overLimit: byKey("sluice_ratelimit_over_limit_total",
			"Hits refused by a limit (envoyproxy/ratelimit's over_limit), shadow_mode refusals included, by domain and descriptor key."),
		nearLimit: byKey("sluice_ratelimit_near_limit_total",
			"Admitted hits past 80% of their limit (envoyproxy/ratelimit's near_limit, NEAR_LIMIT_RATIO 0.8), by domain and descriptor key."),
		withinLimit: byKey("sluice_ratelimit_within_limit_total",
			"Hits admitted by a limit (envoyproxy/ratelimit's within_limit), by domain and descriptor key."),
		shadowMode: byKey("sluice_ratelimit_shadow_mode_total",
			"Hits a shadow_mode limit (or a DryRun domain) would have refused and answered OK (envoyproxy/ratelimit's shadow_mode), by domain and descriptor key."),
		reg: reg,
	}
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

// hits counts what a limited descriptor asked, hits of them (0 for a
// check that counts nothing), as envoyproxy/ratelimit's per-key
// statistics do. d is the descriptor's own decision, before a refused
// call gives its hits back: they were within their limit. A refused
// descriptor counts nothing in Redis, so all its hits are over the limit.
func (m *Metrics) hits(r *Rule, d limiter.Decision, hits int64, shadow bool) {
	if m == nil {
		return
	}
	domain, key := r.domain.name, r.statKey
	n := float64(hits)
	m.totalHits.WithLabelValues(domain, key).Add(n)
	if !d.Allowed {
		m.overLimit.WithLabelValues(domain, key).Add(n)
		if shadow {
			m.shadowMode.WithLabelValues(domain, key).Add(n)
		}
		return
	}
	m.withinLimit.WithLabelValues(domain, key).Add(n)
	used := d.Limit - d.Remaining
	if near := used - max(d.Limit*nearLimitPercent/100, used-hits); near > 0 {
		m.nearLimit.WithLabelValues(domain, key).Add(float64(near))
	}
}

func (m *Metrics) degraded() {
	if m != nil {
		m.degradedN.Inc()
	}
}

// oversized counts a call refused for a bound; domain is "" for a domain
// the table does not have.
func (m *Metrics) oversized(domain, bound string) {
	if m != nil {
		m.oversizedN.WithLabelValues(domain, bound).Inc()
	}
}

func (m *Metrics) refundFailed() {
	if m != nil {
		m.refunds.Inc()
	}
}

func (m *Metrics) peeked(domain string, calls int) {
	if m == nil {
		return
	}
	n, _ := m.peeks.LoadOrStore(domain, new(atomic.Int64))
	n.(*atomic.Int64).Add(int64(calls))
}

func (m *Metrics) peekCount(domain string) int64 {
	if n, ok := m.peeks.Load(domain); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// The guard's counters, read at each scrape for the domains in service.
var (
	redisCalls = prometheus.NewDesc("sluice_ratelimit_redis_calls_total",
		"Redis script calls by domain: decisions, leases, lease returns and refunds. Divided by the domain's sluice_ratelimit_descriptors_total, the Redis calls per decision.",
		[]string{"domain"}, nil)
	localDecisions = prometheus.NewDesc("sluice_ratelimit_local_decisions_total",
		"Descriptors decided without a Redis call, by domain: admitted from a lease, or refused by the denial cache until the time Redis gave.",
		[]string{"domain", "decision"}, nil)
)

// watch registers the counters of s's guard.
func (m *Metrics) watch(s *Service) {
	if m != nil {
		m.reg.MustRegister(guardCollector{s})
	}
}

type guardCollector struct{ s *Service }

func (c guardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- redisCalls
	ch <- localDecisions
}

func (c guardCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.s.table.Load()
	if t == nil {
		return
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for name, d := range t.domains {
		calls := c.s.metrics.peekCount(name)
		var admits, refusals int64
		if lc := c.s.backendOf(d).Guard.LeaseCounts(d.policy); lc != nil {
			calls += lc.RedisCalls.Load()
			admits, refusals = lc.LeaseAdmits.Load(), lc.CachedRefusals.Load()
		}
		counter(redisCalls, calls, name)
		counter(localDecisions, admits, name, "admitted")
		counter(localDecisions, refusals, name, "refused")
	}
}
