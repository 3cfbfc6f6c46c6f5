// Package monitoring checks the chart's alert rules and Grafana dashboard
// with the real Prometheus tools: promtool checks the rules rendered out of
// the chart and runs their unit tests (testdata/alerts.test.yaml), and the
// dashboard's structure is checked. The end-to-end suite (test/e2e,
// monitoring_test.go) evaluates the same rules and the dashboard's queries
// on a real Prometheus scraping the real components.
package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/testing/proc"
	"github.com/sluice-dev/sluice/internal/testing/promtest"
)

// alertLabels are extra labels of every alert (the chart's
// prometheusRule.alertLabels), so the tests see them added.
var alertLabels = []string{"prometheusRule.alertLabels.team=sre"}

// renderRules writes the chart's rules into dir/rules.yaml, beside a copy
// of the unit tests that load them, and returns the rules.
func renderRules(t *testing.T, dir string) []byte {
	t.Helper()
	g := NewWithT(t)
	root, err := proc.Root()
	g.Expect(err).NotTo(HaveOccurred())
	rules, err := promtest.RulesFile(root, alertLabels...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644)).To(Succeed())
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts.test.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), tests, 0o644)).To(Succeed())
	return rules
}

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := promtest.Binary("promtool")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(bin, args...).CombinedOutput()
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "promtool %v:\n%s", args, out)
	return string(out)
}

func TestChartRulesPassPromtoolCheck(t *testing.T) {
	dir := t.TempDir()
	rules := renderRules(t, dir)
	alerts, err := promtest.Alerts(rules)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(alerts).NotTo(BeEmpty())
	out := promtool(t, "check", "rules", filepath.Join(dir, "rules.yaml"))
	NewWithT(t).Expect(out).To(ContainSubstring("SUCCESS"))
}

// TestChartAlertsFireOnTheirUnitTests runs promtool's unit tests of the
// alerts: for each, series that make it fire (with its labels and
// annotations as the chart renders them) and series that do not.
func TestChartAlertsFireOnTheirUnitTests(t *testing.T) {
	dir := t.TempDir()
	renderRules(t, dir)
	out := promtool(t, "test", "rules", filepath.Join(dir, "alerts.test.yaml"))
	NewWithT(t).Expect(out).To(ContainSubstring("SUCCESS"))
}

// TestEveryAlertHasAFiringAndAQuietCase keeps the unit tests complete: an
// alert added to the chart fails here until it has both cases.
func TestEveryAlertHasAFiringAndAQuietCase(t *testing.T) {
	g := NewWithT(t)
	alerts, err := promtest.Alerts(renderRules(t, t.TempDir()))
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join("testdata", "alerts.test.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var file struct {
		Tests []struct {
			AlertRuleTest []struct {
				AlertName string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	g.Expect(yaml.Unmarshal(data, &file)).To(Succeed())
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, test := range file.Tests {
		for _, a := range test.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	for _, a := range alerts {
		g.Expect(fires).To(HaveKey(a.Name), "testdata/alerts.test.yaml has no case where %s fires", a.Name)
		g.Expect(quiet).To(HaveKey(a.Name), "testdata/alerts.test.yaml has no case where %s stays quiet", a.Name)
	}
}
