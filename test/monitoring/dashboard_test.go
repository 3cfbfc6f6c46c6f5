package monitoring

import (
	"encoding/json"
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

// The dashboard is what Grafana's schema describes: the fields Grafana
// knows, of the types it reads.
func TestDashboardMatchesGrafanasSchema(t *testing.T) {
	g := NewWithT(t)
	root, err := proc.Root()
	g.Expect(err).NotTo(HaveOccurred())
	data, err := promtest.ReadDashboardJSON(root)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(promtest.SchemaProblems(data)).To(BeEmpty())
}

// A copy of the dashboard with a misspelled field, a value of the wrong
// type, a missing required field, a panel type Grafana has no schema for
// and a query without a data source type is refused, each by its path.
func TestDashboardSchemaRefusesABrokenCopy(t *testing.T) {
	g := NewWithT(t)
	root, err := proc.Root()
	g.Expect(err).NotTo(HaveOccurred())
	data, err := promtest.ReadDashboardJSON(root)
	g.Expect(err).NotTo(HaveOccurred())
	var d map[string]any
	g.Expect(json.Unmarshal(data, &d)).To(Succeed())
	panel := func(i int) map[string]any { return d["panels"].([]any)[i].(map[string]any) }
	panel(1)["titel"] = "Requests decided / s"
	panel(2)["gridPos"].(map[string]any)["w"] = "6"
	delete(panel(3)["options"].(map[string]any), "reduceOptions")
	panel(4)["fieldConfig"].(map[string]any)["defaults"].(map[string]any)["unti"] = "percentunit"
	panel(5)["type"] = "timeserie"
	delete(panel(6), "datasource")
	delete(panel(6)["targets"].([]any)[0].(map[string]any), "datasource")
	broken, err := json.Marshal(d)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(promtest.SchemaProblems(broken)).To(ConsistOf(
		"panels[1].Panel: unexpected field 'titel'",
		"panels[2].gridPos.w: json: cannot unmarshal string into Go value of type uint32",
		"panels[3].options.reduceOptions: required field is missing from input",
		"panels[4].fieldConfig.defaults.FieldConfig: unexpected field 'unti'",
		`panels[5].type: Grafana has no schema for panel type "timeserie"`,
		"panels[6].targets[0]: no data source type to check the query against: set datasource.type on the panel or the query",
	))
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
