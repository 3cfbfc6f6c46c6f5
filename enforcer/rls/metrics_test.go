package rls

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The per-key counters are envoyproxy/ratelimit's statistics, in hits, by
// domain and the descriptor key of the configuration.
func TestMetricsCountHitsAsEnvoyRatelimitDoes(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	// Redis has a second, so that a loaded machine decides nothing by the
	// failure mode.
	in := serve(t, "domain: "+domain+`
sluice: {timeout: 1s}
descriptors:
  - {key: user, rate_limit: {unit: hour, requests_per_unit: 10, sluice: {leasing: "Off"}}}
  - key: tenant
    value: acme
    descriptors:
      - {key: plan, rate_limit: {unit: hour, requests_per_unit: 10, sluice: {leasing: "Off"}}}
  - {key: ip, shadow_mode: true, rate_limit: {unit: hour, requests_per_unit: 1, sluice: {leasing: "Off"}}}
  - {key: free, rate_limit: {unlimited: true}}
`)
	// user: 7 hits, then 3 (the last 2 past 80% of 10), then 1 refused.
	g.Expect(in.call(t, domain, 7, descriptor("user", "ann")).OverallCode).To(Equal(ok))
	g.Expect(in.call(t, domain, 3, descriptor("user", "ann")).OverallCode).To(Equal(ok))
	g.Expect(in.call(t, domain, 0, descriptor("user", "ann")).OverallCode).To(Equal(overLimit))
	peek := descriptor("user", "ann")
	peek.HitsAddend = wrapperspb.UInt64(0)
	g.Expect(in.call(t, domain, 0, peek).OverallCode).To(Equal(overLimit), "a check of 0 hits counts 0 hits")
	g.Expect(in.call(t, domain, 0, descriptor("tenant", "acme", "plan", "gold")).OverallCode).To(Equal(ok))
	for range 3 {
		g.Expect(in.call(t, domain, 0, descriptor("ip", "10.0.0.1"), descriptor("free", "x"), descriptor("color", "red")).OverallCode).To(Equal(ok))
	}

	m := in.metrics
	count := func(c *prometheus.CounterVec, key string) float64 {
		return testutil.ToFloat64(c.WithLabelValues(domain, key))
	}
	for _, w := range []struct {
		key                                     string
		total, within, near, over, shadowRefuse float64
	}{
		{"user", 11, 10, 2, 1, 0},
		{"tenant_acme.plan", 1, 1, 0, 0, 0},
		{"ip", 3, 1, 1, 2, 2}, // with a limit of 1, the one admitted hit is past 80%
	} {
		g.Expect(count(m.totalHits, w.key)).To(Equal(w.total), "total_hits of %s", w.key)
		g.Expect(count(m.withinLimit, w.key)).To(Equal(w.within), "within_limit of %s", w.key)
		g.Expect(count(m.nearLimit, w.key)).To(Equal(w.near), "near_limit of %s", w.key)
		g.Expect(count(m.overLimit, w.key)).To(Equal(w.over), "over_limit of %s", w.key)
		g.Expect(count(m.shadowMode, w.key)).To(Equal(w.shadowRefuse), "shadow_mode of %s", w.key)
	}
	g.Expect(testutil.CollectAndCount(m.totalHits)).To(Equal(3), "unlimited and unmatched descriptors have no series; values are never labels")

	// Without leases, every decision is one Redis call: user 3 and its
	// check of 0 hits, tenant 1, ip 3.
	reg := m.reg.(*prometheus.Registry)
	g.Expect(testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP sluice_ratelimit_local_decisions_total Descriptors decided without a Redis call, by domain: admitted from a lease, or refused by the denial cache until the time Redis gave.
# TYPE sluice_ratelimit_local_decisions_total counter
sluice_ratelimit_local_decisions_total{decision="admitted",domain="`+domain+`"} 0
sluice_ratelimit_local_decisions_total{decision="refused",domain="`+domain+`"} 0
# HELP sluice_ratelimit_redis_calls_total Redis script calls by domain: decisions, leases, lease returns and refunds. Divided by the domain's sluice_ratelimit_descriptors_total, the Redis calls per decision.
# TYPE sluice_ratelimit_redis_calls_total counter
sluice_ratelimit_redis_calls_total{domain="`+domain+`"} 8
`), "sluice_ratelimit_redis_calls_total", "sluice_ratelimit_local_decisions_total")).To(Succeed())
}

// A bucket Redis refused until the end of its window is refused locally
// until then, and those local decisions are counted.
func TestMetricsCountLocalDecisions(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+"\nsluice: {timeout: 1s}\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 2}}]")
	for i := range 5 {
		want := ok
		if i >= 2 {
			want = overLimit
		}
		g.Expect(in.call(t, domain, 0, descriptor("user", "ann")).OverallCode).To(Equal(want), "call %d", i+1)
	}
	g.Expect(testutil.GatherAndCompare(in.metrics.reg.(*prometheus.Registry), strings.NewReader(`
# HELP sluice_ratelimit_local_decisions_total Descriptors decided without a Redis call, by domain: admitted from a lease, or refused by the denial cache until the time Redis gave.
# TYPE sluice_ratelimit_local_decisions_total counter
sluice_ratelimit_local_decisions_total{decision="admitted",domain="`+domain+`"} 0
sluice_ratelimit_local_decisions_total{decision="refused",domain="`+domain+`"} 2
# HELP sluice_ratelimit_redis_calls_total Redis script calls by domain: decisions, leases, lease returns and refunds. Divided by the domain's sluice_ratelimit_descriptors_total, the Redis calls per decision.
# TYPE sluice_ratelimit_redis_calls_total counter
sluice_ratelimit_redis_calls_total{domain="`+domain+`"} 3
`), "sluice_ratelimit_redis_calls_total", "sluice_ratelimit_local_decisions_total")).To(Succeed())
	g.Expect(testutil.ToFloat64(in.metrics.overLimit.WithLabelValues(domain, "user"))).To(Equal(3.0), "refusals from the cache count as over_limit")
}

// The per-key statistics name a descriptor as envoyproxy/ratelimit's do,
// so that its users' dashboards match: the value as the file spells it
// (path_/v1/export, not the escaped rule name), ':' and '|' as '_', and an
// IPv4 address with '_' for its dots.
func TestMetricsKeyIsEnvoyRatelimits(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+"\nsluice: {timeout: 1s}\ndescriptors:\n"+
		"  - {key: path, value: /v1/export, rate_limit: {unit: hour, requests_per_unit: 10}}\n"+
		"  - {key: remote_address, value: 10.0.0.1, rate_limit: {unit: hour, requests_per_unit: 10}}\n"+
		"  - {key: route, value: \"a:b|c\", rate_limit: {unit: hour, requests_per_unit: 10}}\n")
	g.Expect(in.call(t, domain, 1, descriptor("path", "/v1/export"), descriptor("remote_address", "10.0.0.1"), descriptor("route", "a:b|c")).OverallCode).To(Equal(ok))
	for _, key := range []string{"path_/v1/export", "remote_address_10_0_0_1", "route_a_b_c"} {
		g.Expect(testutil.ToFloat64(in.metrics.totalHits.WithLabelValues(domain, key))).To(Equal(1.0), "total_hits of %s", key)
	}
	g.Expect(testutil.CollectAndCount(in.metrics.totalHits)).To(Equal(3), "no other series")
}
