package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// Ban metrics, read from the backends' guards at each scrape. Requests
// refused because of a ban are sluice_enforcer_decisions_total with
// decision="banned".
var (
	bansStarted = prometheus.NewDesc("sluice_enforcer_bans_started_total",
		"Bans this enforcer's decisions started, by policy, rule and level (1 for a first ban).",
		[]string{"policy", "rule", "level"}, nil)
	banCachedRefusals = prometheus.NewDesc("sluice_enforcer_ban_cached_refusals_total",
		"Requests of banned tenants refused from the enforcer's ban cache, without a Redis call, by policy.",
		[]string{"policy"}, nil)
)

type banCollector func() []*engine.Backend

func (c banCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- bansStarted
	ch <- banCachedRefusals
}

func (c banCollector) Collect(ch chan<- prometheus.Metric) {
	started := map[limiter.BanStartKey]int64{}
	refused := map[string]int64{}
	for _, be := range c() {
		be.Guard.BansStarted(func(k limiter.BanStartKey, n int64) { started[k] += n })
		be.Guard.BanCachedRefusals(func(p string, n int64) { refused[p] += n })
	}
	for k, n := range started {
		ch <- prometheus.MustNewConstMetric(bansStarted, prometheus.CounterValue, float64(n), k.Policy, k.Rule, strconv.FormatInt(k.Level, 10))
	}
	for p, n := range refused {
		ch <- prometheus.MustNewConstMetric(banCachedRefusals, prometheus.CounterValue, float64(n), p)
	}
}
