// Package metrics is the enforcer's Prometheus recorder: what the proxy
// decides, per policy, rule and tier, and the state of its Redis backends,
// leases, slots, bans, delays and overload bounds, read at each scrape. The
// admin server serves it on /metrics.
package metrics

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/rules"
	"github.com/sluice-dev/sluice/enforcer/status"
)

// Metrics are the enforcer's Prometheus metrics, in a registry of their own,
// and the per-policy decision counters of /status. Labels name policies,
// rules, tiers (a bounded set the policy defines) and Redis backends (by
// the environment variable naming them): never a tenant, an API key or a
// URL.
//
// Metrics implements engine.Recorder and reload.Observer.
type Metrics struct {
	Registry *prometheus.Registry
	// top keeps the heaviest and most refused tenants (toptenants.go).
	top *TopTenants

	decisions      *prometheus.CounterVec
	failureMode    *prometheus.CounterVec
	checkErrors    *prometheus.CounterVec
	redisLatency   *prometheus.HistogramVec
	upstreamErrors prometheus.Counter
	refused        *prometheus.CounterVec
	reloads        prometheus.Counter
	reloadErrors   prometheus.Counter
	reloadOK       prometheus.Gauge
	reloadTime     prometheus.Gauge
	configInfo     *prometheus.GaugeVec
	configPolicies prometheus.Gauge
	configMissing  prometheus.Gauge
	delay          *delayMetrics
	response       *responseMetrics

	// Children of the vectors, cached by label values: WithLabelValues
	// hashes its labels on every call, the request path should not.
	mu       sync.RWMutex
	byCheck  map[checkKey]prometheus.Counter
	byPolicy map[string]*policyCounts
	byMode   map[[2]string]prometheus.Counter
	byRedis  map[string]prometheus.Observer
}

type checkKey struct {
	policy, rule, tier string
	verdict            engine.Verdict
}

// policyCounts are one policy's decisions, as /status reports them.
type policyCounts struct {
	verdicts    [4]atomic.Int64 // indexed by engine.Verdict
	failureMode atomic.Int64
}

// NewMetrics registers every metric, and the Go runtime and process
// collectors, in a new registry.
func NewMetrics(version string) *Metrics {
	reg := prometheus.NewRegistry()
	f := promauto.With(reg)
	m := &Metrics{
		Registry: reg,
		top:      NewTopTenants(),
		decisions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_enforcer_decisions_total",
			Help: "Rule decisions, by policy, rule, decision (allowed, denied, would_deny, banned) and tier.",
		}, []string{"policy", "rule", "decision", "tier"}),
		failureMode: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_enforcer_failure_mode_decisions_total",
			Help: "Rule decisions made by the policy's failure mode because Redis did not answer in time, by policy and mode.",
		}, []string{"policy", "mode"}),
		checkErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_enforcer_check_errors_total",
			Help: "Rule checks that could not be decided at all and were let through, by policy.",
		}, []string{"policy"}),
		redisLatency: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_enforcer_redis_round_trip_seconds",
			Help:    "Time to decide one request's rules in one Redis round trip, by Redis backend (default, or the environment variable naming it).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"redis"}),
		upstreamErrors: f.NewCounter(prometheus.CounterOpts{
			Name: "sluice_enforcer_upstream_errors_total",
			Help: "Requests answered 502 because the application could not be reached.",
		}),
		refused: f.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_enforcer_requests_refused_total",
			Help: "Requests refused before any rule was checked because the application could read them otherwise than the limiter (400), or they broke a size or time limit (408, 413, 431), by reason.",
		}, []string{"reason"}),
		reloads: f.NewCounter(prometheus.CounterOpts{
			Name: "sluice_enforcer_config_reloads_total",
			Help: "Configurations put into service, the first one included.",
		}),
		reloadErrors: f.NewCounter(prometheus.CounterOpts{
			Name: "sluice_enforcer_config_reload_errors_total",
			Help: "Configuration changes that failed to load or apply; the last good configuration stayed in service.",
		}),
		reloadOK: f.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_enforcer_config_last_reload_successful",
			Help: "1 when the last configuration change was put into service, 0 when it was refused.",
		}),
		reloadTime: f.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_enforcer_config_last_reload_success_timestamp_seconds",
			Help: "When the configuration in service was loaded, in Unix seconds.",
		}),
		configInfo: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_enforcer_config_info",
			Help: "The configuration in service: 1 for its hash.",
		}, []string{"hash"}),
		configPolicies: f.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_enforcer_config_policies",
			Help: "Policies of the configuration in service that select this pod; 0 means its traffic passes through unlimited.",
		}),
		configMissing: f.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_enforcer_config_file_missing",
			Help: "1 while the configuration file is gone (its ConfigMap deleted): the last good configuration stays in service.",
		}),
		byCheck:  map[checkKey]prometheus.Counter{},
		byPolicy: map[string]*policyCounts{},
		byMode:   map[[2]string]prometheus.Counter{},
		byRedis:  map[string]prometheus.Observer{},
	}
	buildInfo := f.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_enforcer_build_info",
		Help: "The enforcer's version: 1.",
	}, []string{"version"})
	buildInfo.WithLabelValues(version).Set(1)
	m.delay = newDelayMetrics(m.Registry)
	m.response = newResponseMetrics(m.Registry)
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// localFallbackEntries is the sluice_enforcer_local_fallback_entries
// gauge, read from the backends at each scrape.
var localFallbackEntries = prometheus.NewDesc("sluice_enforcer_local_fallback_entries",
	"Keys the LocalFallback state holds, by Redis backend; at --local-fallback-max-entries, new tenants are admitted unlimited while Redis is down.",
	[]string{"redis"}, nil)

type localFallbackCollector func() []*engine.Backend

func (c localFallbackCollector) Describe(ch chan<- *prometheus.Desc) { ch <- localFallbackEntries }

func (c localFallbackCollector) Collect(ch chan<- prometheus.Metric) {
	for _, be := range c() {
		ch <- prometheus.MustNewConstMetric(localFallbackEntries, prometheus.GaugeValue, float64(be.Guard.LocalEntries()), be.Name)
	}
}

// Lease metrics, read from the backends' guards at each scrape: what each
// policy decided without Redis, and what its leases took and gave back.
var (
	localDecisions = prometheus.NewDesc("sluice_enforcer_local_decisions_total",
		"Decisions made without a Redis call, by policy: admitted from a lease, or refused by the denial cache until the Retry-After Redis gave.",
		[]string{"policy", "decision"}, nil)
	redisCalls = prometheus.NewDesc("sluice_enforcer_redis_calls_total",
		"Redis script calls by policy: decisions, leases, lease returns and refunds. Divided by sluice_enforcer_decisions_total, the Redis calls per decision.",
		[]string{"policy"}, nil)
	leaseGrants = prometheus.NewDesc("sluice_enforcer_lease_grants_total",
		"Leases granted by Redis, by policy.", []string{"policy"}, nil)
	leaseUnits = prometheus.NewDesc("sluice_enforcer_lease_units_total",
		"Units of leases by policy and what became of them: leased (taken from Redis beyond the deciding request's cost), returned (given back unused), expired (their fixed window ended first), lost (a return Redis did not confirm; never sent twice).",
		[]string{"policy", "outcome"}, nil)
	leaseFailures = prometheus.NewDesc("sluice_enforcer_lease_failures_total",
		"Lease calls (kind lease) and lease returns (kind return) that Redis did not answer in time, by policy.",
		[]string{"policy", "kind"}, nil)
)

type leaseCollector func() []*engine.Backend

func (c leaseCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{localDecisions, redisCalls, leaseGrants, leaseUnits, leaseFailures} {
		ch <- d
	}
}

func (c leaseCollector) Collect(ch chan<- prometheus.Metric) {
	type sums struct {
		admits, refusals, calls, grants, leased, returned, expired, lost, leaseFails, returnFails int64
	}
	byPolicy := map[string]*sums{}
	for _, be := range c() {
		for _, p := range be.Guard.LeasePolicies() {
			lc := be.Guard.LeaseCounts(p)
			s := byPolicy[p]
			if s == nil {
				s = &sums{}
				byPolicy[p] = s
			}
			s.admits += lc.LeaseAdmits.Load()
			s.refusals += lc.CachedRefusals.Load()
			s.calls += lc.RedisCalls.Load()
			s.grants += lc.Grants.Load()
			s.leased += lc.UnitsLeased.Load()
			s.returned += lc.UnitsReturned.Load()
			s.expired += lc.UnitsExpired.Load()
			s.lost += lc.UnitsLost.Load()
			s.leaseFails += lc.LeaseFailures.Load()
			s.returnFails += lc.ReturnFailures.Load()
		}
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for p, s := range byPolicy {
		counter(localDecisions, s.admits, p, "admitted")
		counter(localDecisions, s.refusals, p, "refused")
		counter(redisCalls, s.calls, p)
		counter(leaseGrants, s.grants, p)
		counter(leaseUnits, s.leased, p, "leased")
		counter(leaseUnits, s.returned, p, "returned")
		counter(leaseUnits, s.expired, p, "expired")
		counter(leaseUnits, s.lost, p, "lost")
		counter(leaseFailures, s.leaseFails, p, "lease")
		counter(leaseFailures, s.returnFails, p, "return")
	}
}

// WatchBackends reports the state the backends that backends lists
// (engine.Backends.All) keep in memory: sluice_enforcer_local_fallback_entries
// and the lease metrics. Call it once.
func (m *Metrics) WatchBackends(backends func() []*engine.Backend) {
	m.Registry.MustRegister(localFallbackCollector(backends), leaseCollector(backends), banCollector(backends), slotCollector(backends))
}

// cached returns the child of key from cache, making it with newChild once.
func cached[K comparable, V any](m *Metrics, cache map[K]V, key K, newChild func() V) V {
	m.mu.RLock()
	v, ok := cache[key]
	m.mu.RUnlock()
	if ok {
		return v
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok = cache[key]; !ok {
		v = newChild()
		cache[key] = v
	}
	return v
}

// Check counts one rule's decision.
func (m *Metrics) Check(p *rules.Policy, r *rules.Rule, tier string, v engine.Verdict) {
	cached(m, m.byCheck, checkKey{p.Name, r.Name, tier, v}, func() prometheus.Counter {
		return m.decisions.WithLabelValues(p.Name, r.Name, v.String(), tier)
	}).Inc()
}

// Policy counts one policy's decision on a request, for /status.
func (m *Metrics) Policy(p *rules.Policy, v engine.Verdict) {
	m.policy(p.Name).verdicts[v].Add(1)
}

func (m *Metrics) policy(name string) *policyCounts {
	return cached(m, m.byPolicy, name, func() *policyCounts { return &policyCounts{} })
}

// Degraded counts a decision made by a failure mode.
func (m *Metrics) Degraded(p *rules.Policy) {
	mode := string(p.Failure.Mode)
	cached(m, m.byMode, [2]string{p.Name, mode}, func() prometheus.Counter {
		return m.failureMode.WithLabelValues(p.Name, mode)
	}).Inc()
	m.policy(p.Name).failureMode.Add(1)
}

// RedisRoundTrip observes one Redis round trip.
func (m *Metrics) RedisRoundTrip(be *engine.Backend, d time.Duration) {
	cached(m, m.byRedis, be.Name, func() prometheus.Observer {
		return m.redisLatency.WithLabelValues(be.Name)
	}).Observe(d.Seconds())
}

// CheckError counts a check that could not be decided.
func (m *Metrics) CheckError(p *rules.Policy, _ error) {
	m.checkErrors.WithLabelValues(p.Name).Inc()
}

// UpstreamError counts a request the application did not answer.
func (m *Metrics) UpstreamError() { m.upstreamErrors.Inc() }

// Refused counts a request refused before any rule was checked.
func (m *Metrics) Refused(reason string) { m.refused.WithLabelValues(reason).Inc() }

// Reloaded records a configuration put into service, which applies
// policies to this pod.
func (m *Metrics) Reloaded(hash string, policies int) {
	m.configPolicies.Set(float64(policies))
	m.reloads.Inc()
	m.reloadOK.Set(1)
	m.reloadTime.SetToCurrentTime()
	m.configInfo.Reset()
	m.configInfo.WithLabelValues(hash).Set(1)
}

// FileMissing records whether the configuration file is gone.
func (m *Metrics) FileMissing(missing bool) {
	if missing {
		m.configMissing.Set(1)
	} else {
		m.configMissing.Set(0)
	}
}

// ReloadFailed records a configuration change that was refused.
func (m *Metrics) ReloadFailed() {
	m.reloadErrors.Inc()
	m.reloadOK.Set(0)
}

// Decisions are the decision counts of every policy that decided a request.
func (m *Metrics) Decisions() map[string]status.DecisionCounts {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[string]status.DecisionCounts, len(m.byPolicy))
	for name, c := range m.byPolicy {
		out[name] = status.DecisionCounts{
			Allowed:     c.verdicts[engine.Allowed].Load(),
			Denied:      c.verdicts[engine.Denied].Load(),
			WouldDeny:   c.verdicts[engine.WouldDeny].Load(),
			Banned:      c.verdicts[engine.Banned].Load(),
			FailureMode: c.failureMode.Load(),
		}
	}
	return out
}
