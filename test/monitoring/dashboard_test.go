package monitoring

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// TestEveryMetricReadIsDeclared fails when an alert or a panel reads a
// Sluice metric that no program's source declares: a renamed metric, or a
// typo, would otherwise leave a panel empty and an alert silent for good.
func TestEveryMetricReadIsDeclared(t *testing.T) {
	g := NewWithT(t)
	root, err := proc.Root()
	g.Expect(err).NotTo(HaveOccurred())
	declared := declaredMetrics(t, root)

	read := map[string]string{} // metric -> where it is read
	alerts, err := promtest.Alerts(renderRules(t, t.TempDir()))
	g.Expect(err).NotTo(HaveOccurred())
	for _, a := range alerts {
		for _, m := range promtest.Metrics(a.Expr) {
			read[m] = "alert " + a.Name
		}
	}
	d, err := promtest.ReadDashboard(root)
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			for _, m := range promtest.Metrics(q.Expr) {
				read[m] = "panel " + p.Title
			}
		}
	}
	for _, v := range d.Templating.List {
		for _, m := range promtest.Metrics(v.Definition) {
			read[m] = "variable " + v.Name
		}
	}
	g.Expect(read).NotTo(BeEmpty())
	for m, where := range read {
		base := m
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(m, suffix); ok && declared[b] {
				base = b
			}
		}
		g.Expect(declared).To(HaveKey(base), "%s reads %s, which no program declares", where, m)
	}
}

// declaredMetrics are the quoted sluice_* names in the programs' Go source
// (tests and test harnesses left out).
func declaredMetrics(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, dir := range []string{"cmd", "controllers", "enforcer", "internal", "ratelimit"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() && e.Name() == "testing" {
				return filepath.SkipDir
			}
			if e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range promtest.Metrics(string(src)) {
				if strings.Contains(string(src), `"`+m+`"`) {
					out[m] = true
				}
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	return out
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
