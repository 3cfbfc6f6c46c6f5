// Package promtest checks Sluice's monitoring with the real Prometheus
// tools: it renders the chart's alert rules into a plain rules file for
// promtool, reads the chart's Grafana dashboard, and runs a Prometheus of
// its own (on a free loopback port, with its own data directory) that
// scrapes the components a test started and answers PromQL.
//
// The chart stays the one source of the rules and the dashboard: nothing
// here keeps a copy of them.
package promtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Binary is prometheus or promtool from PATH; missing, it is an error
// that says what installs it, not a skip.
func Binary(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not on PATH: run make prometheus (make test does it), which installs Debian's prometheus", name)
	}
	return path, nil
}

// Helm is bin/helm under root, built by hack/build-tool.sh when missing.
func Helm(root string) (string, error) {
	bin := filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	out, err := exec.Command(filepath.Join(root, "hack", "build-tool.sh"), "helm", bin).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build helm (hack/build-tool.sh helm %s): %w\n%s", bin, err, out)
	}
	return bin, nil
}

// RulesFile renders the chart's PrometheusRule (templates/prometheusrule.yaml)
// with the chart's default values and the --set values in set, and returns
// its spec: the rule groups, as a rules file Prometheus and promtool load.
func RulesFile(root string, set ...string) ([]byte, error) {
	helm, err := Helm(root)
	if err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp("", "sluice-helm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	args := []string{"template", "sluice", filepath.Join(root, "charts", "sluice"), "--namespace", "sluice-system",
		"--show-only", "templates/prometheusrule.yaml", "--set", "prometheusRule.enabled=true"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helm, args...)
	// helm's cache and configuration stay out of $HOME.
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var rule struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(out, &rule); err != nil {
		return nil, fmt.Errorf("read the rendered PrometheusRule: %w", err)
	}
	if rule.Kind != "PrometheusRule" || len(rule.Spec.Groups) == 0 {
		return nil, errors.New("the chart rendered no PrometheusRule with rule groups:\n" + string(out))
	}
	return yaml.Marshal(rule.Spec)
}

// Alert is one alerting rule of a rules file.
type Alert struct {
	Group       string            `json:"-"`
	Name        string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// Alerts are the alerting rules of a rules file, in its order.
func Alerts(rulesFile []byte) ([]Alert, error) {
	var file struct {
		Groups []struct {
			Name  string  `json:"name"`
			Rules []Alert `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(rulesFile, &file); err != nil {
		return nil, fmt.Errorf("read rules file: %w", err)
	}
	var out []Alert
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Name != "" {
				r.Group = g.Name
				out = append(out, r)
			}
		}
	}
	return out, nil
}
