package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/enforcer/engine"
)

// Concurrency metrics, read from the backends' guards at each scrape.
var (
	concurrencySlots = prometheus.NewDesc("sluice_enforcer_concurrency_slots",
		"Slots of Concurrency rules this enforcer's requests hold now (requests in flight times their cost), by policy; LocalFallback slots included.",
		[]string{"policy"}, nil)
	concurrencyRefused = prometheus.NewDesc("sluice_enforcer_concurrency_refused_total",
		"Requests a Concurrency rule refused (would have, in DryRun) because the tenant had its limit in flight, by policy.",
		[]string{"policy"}, nil)
	concurrencyWaiting = prometheus.NewDesc("sluice_enforcer_concurrency_waiting",
		"Requests waiting in this enforcer for a slot of a Concurrency rule with onLimit.delay, by policy.",
		[]string{"policy"}, nil)
)

type slotCollector func() []*engine.Backend

func (c slotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- concurrencySlots
	ch <- concurrencyRefused
	ch <- concurrencyWaiting
}

func (c slotCollector) Collect(ch chan<- prometheus.Metric) {
	inUse, refused, waiting := map[string]int64{}, map[string]int64{}, map[string]int64{}
	for _, be := range c() {
		for _, p := range be.Guard.SlotPolicies() {
			sc := be.Guard.SlotCounts(p)
			inUse[p] += sc.InUse.Load()
			refused[p] += sc.Refused.Load()
			waiting[p] += sc.Waiting.Load()
		}
	}
	for p, n := range inUse {
		ch <- prometheus.MustNewConstMetric(concurrencySlots, prometheus.GaugeValue, float64(n), p)
		ch <- prometheus.MustNewConstMetric(concurrencyRefused, prometheus.CounterValue, float64(refused[p]), p)
		ch <- prometheus.MustNewConstMetric(concurrencyWaiting, prometheus.GaugeValue, float64(waiting[p]), p)
	}
}
