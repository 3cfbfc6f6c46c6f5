package monitoring

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/proc"
	"github.com/sluice-dev/sluice/internal/testing/promtest"
)

func TestDashboardIsWellFormed(t *testing.T) {
	g := NewWithT(t)
	root, err := proc.Root()
	g.Expect(err).NotTo(HaveOccurred())
	d, err := promtest.ReadDashboard(root)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Panels).NotTo(BeEmpty())
	g.Expect(d.Problems()).To(BeEmpty())
}

// The checks themselves catch what they are for.
func TestDashboardProblemsAreFound(t *testing.T) {
	d := &promtest.Dashboard{Panels: []promtest.Panel{
		{ID: 1, Type: "stat", GridPos: &promtest.GridPos{W: 6, H: 4},
			Datasource: &promtest.Datasource{UID: "${datasource}"},
			Targets:    []promtest.Target{{RefID: "A", Expr: `sum(rate(x{namespace=~"$namespace"}[$__rate_interval]))`}}},
		{ID: 1, Type: "timeseries", GridPos: &promtest.GridPos{X: 20, W: 6, H: 4},
			Targets: []promtest.Target{{RefID: "A"}, {RefID: "A", Expr: "up"}}},
	}}
	NewWithT(t).Expect(d.Problems()).To(ConsistOf(
		`panel 1 ()'s datasource refers to $datasource, which the dashboard does not define`,
		`panel 1 () target 0 refers to $namespace, which the dashboard does not define`,
		`panel 1 () has the id of panel ""`,
		`panel 1 () has no gridPos within the 24 columns`,
		`panel 1 () has no datasource`,
		`panel 1 () target 0 has no expr`,
		`panel 1 () target 1 has no refId or repeats one`,
	))
}

func TestDashboardQueriesGetTheirVariables(t *testing.T) {
	g := NewWithT(t)
	d := &promtest.Dashboard{Panels: []promtest.Panel{{ID: 2, Title: "Rate", Targets: []promtest.Target{
		{RefID: "A", Expr: `sum(rate(m{namespace=~"$namespace", policy=~"${policy}"}[$__rate_interval]))`},
	}}}}
	queries, err := d.Queries(map[string]string{"namespace": "shop", "policy": "(api|web)", "__rate_interval": "10s"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(queries).To(ConsistOf(HaveField("PromQL", `sum(rate(m{namespace=~"shop", policy=~"(api|web)"}[10s]))`)))
	_, err = d.Queries(map[string]string{"namespace": "shop", "__rate_interval": "10s"})
	g.Expect(err).To(MatchError(ContainSubstring("[policy]")))
}
