package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/enforcer/overload"
)

var (
	inFlightDesc = prometheus.NewDesc("sluice_enforcer_requests_in_flight",
		"Requests the enforcer holds now (waiting for Redis, a delay or the application).", nil, nil)
	maxInFlightDesc = prometheus.NewDesc("sluice_enforcer_requests_in_flight_limit",
		"--max-in-flight: requests the enforcer holds at most; more get 503.", nil, nil)
	connectionsDesc = prometheus.NewDesc("sluice_enforcer_client_connections",
		"Client connections open on the proxy port.", nil, nil)
	overloadedDesc = prometheus.NewDesc("sluice_enforcer_overloaded",
		"1 while the enforcer refuses new requests for want of room (near its memory limit, or at its bound in flight).", nil, nil)
	shedDesc = prometheus.NewDesc("sluice_enforcer_shed_total",
		"Requests refused with 503 (reason in_flight, tenant_share, memory) and idle client connections closed (idle_connection) for want of room.",
		[]string{"reason"}, nil)
)

// overloadCollector reads an Overload at each scrape, so that the request
// path updates no metric of its own.
type overloadCollector struct{ o *overload.Shedder }

func (c overloadCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{inFlightDesc, maxInFlightDesc, connectionsDesc, overloadedDesc, shedDesc} {
		ch <- d
	}
}

func (c overloadCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.o.State()
	overloaded := 0.0
	if st.Overloaded {
		overloaded = 1
	}
	ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(st.InFlight))
	ch <- prometheus.MustNewConstMetric(maxInFlightDesc, prometheus.GaugeValue, float64(c.o.Limits().MaxInFlight))
	ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(st.Connections))
	ch <- prometheus.MustNewConstMetric(overloadedDesc, prometheus.GaugeValue, overloaded)
	for reason, n := range st.Shed {
		ch <- prometheus.MustNewConstMetric(shedDesc, prometheus.CounterValue, float64(n), reason)
	}
}

// WatchOverload reports o's state in the metrics.
func (m *Metrics) WatchOverload(o *overload.Shedder) {
	m.Registry.MustRegister(overloadCollector{o})
}
