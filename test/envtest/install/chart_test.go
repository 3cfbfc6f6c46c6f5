/*
Copyright 2026 The Sluice Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package install

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("The chart's values", func() {
	It("lint strictly: the defaults and every ci/ values file", func() {
		mustHelm("lint", "--strict", chartDir)
		for _, name := range ciValuesFiles() {
			mustHelm("lint", "--strict", chartDir, "-f", filepath.Join(chartDir, "ci", name))
		}
	})

	// Schema violations fail helm lint as well as install; values that are
	// well-typed but contradict each other fail install and template (helm
	// lint reports a template's fail only as information).
	DescribeTable("are refused, with the offending value named, when a values file has a mistake",
		func(values, message string, lintRefuses bool) {
			f := valuesFile(values)
			if lintRefuses {
				out, err := helm("lint", "--strict", chartDir, "-f", f)
				Expect(err).To(HaveOccurred(), "helm lint accepted:\n%s", values)
				Expect(out).To(ContainSubstring(message))
			}
			out, err := helm("template", "refused", chartDir, "-f", f)
			Expect(err).To(HaveOccurred(), "helm template accepted:\n%s", values)
			Expect(out).To(ContainSubstring(message))

			out, err = helm("install", "refused", chartDir, "-n", "default", "-f", f)
			Expect(err).To(HaveOccurred(), "helm install accepted:\n%s", values)
			Expect(out).To(ContainSubstring(message))
			_, err = helm("status", "refused", "-n", "default")
			Expect(err).To(HaveOccurred(), "a refused install must leave no release")
		},
		Entry("an unknown key", "manager:\n  replica: 3\n",
			"at '/manager': additional properties 'replica' not allowed", true),
		Entry("a misspelt top-level key", "metric:\n  enabled: false\n",
			"additional properties 'metric' not allowed", true),
		Entry("a wrong type", "manager:\n  replicas: \"2\"\n",
			"at '/manager/replicas': got string, want integer", true),
		Entry("a value outside its set", "webhook:\n  failurePolicy: fail\n",
			"at '/webhook/failurePolicy': value must be one of 'Ignore', 'Fail'", true),
		Entry("a password in the default Redis URL", "defaultRedis:\n  url: redis://:hunter2@redis:6379\n",
			"defaultRedis.url carries a password", false),
		Entry("several replicas without leader election", "manager:\n  leaderElection: false\n",
			"manager.leaderElection must be true with more than one replica", false),
	)
})

var _ = Describe("The generated manifests", func() {
	It("are the same in the chart, config/default and controller-gen's output (make manifests regenerates all)", func() {
		out, err := run(filepath.Join(root, "hack", "sync-chart.sh"), "--check")
		Expect(err).NotTo(HaveOccurred(), "%s", out)
	})
})

var _ = Describe("The chart's alerts and dashboard", func() {
	// metricRef is a Sluice metric name in PromQL.
	metricRef := regexp.MustCompile(`\bsluice_[a-z0-9_]+`)

	// exported are the metric names of the enforcer and the rate limit
	// service, with the series a histogram adds.
	exported := func() []string {
		var names []string
		for _, file := range []string{"enforcer/metrics/metrics.go", "enforcer/metrics/delay_metrics.go",
			"enforcer/metrics/response_metrics.go", "enforcer/rls/metrics.go", "cmd/ratelimit/server.go"} {
			data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
			Expect(err).NotTo(HaveOccurred())
			found := regexp.MustCompile(`Name:\s+"(sluice_[a-z0-9_]+)"`).FindAllStringSubmatch(string(data), -1)
			Expect(found).NotTo(BeEmpty(), "no metric in %s", file)
			for _, m := range found {
				names = append(names, m[1], m[1]+"_bucket", m[1]+"_sum", m[1]+"_count")
			}
		}
		return names
	}

	It("alert on what users of a rate limiter watch, with metrics the enforcer exports", func() {
		rendered := mustHelm("template", release, chartDir, "-n", releaseNamespace,
			"-f", filepath.Join(chartDir, "ci", "monitoring-values.yaml"))
		var rule map[string]any
		for _, obj := range decodeObjects(rendered) {
			if obj.GetKind() == "PrometheusRule" {
				rule = obj.Object
			}
		}
		Expect(rule).NotTo(BeNil(), "prometheusRule.enabled renders no PrometheusRule")
		var alerts []string
		known := exported()
		for _, group := range rule["spec"].(map[string]any)["groups"].([]any) {
			for _, r := range group.(map[string]any)["rules"].([]any) {
				r := r.(map[string]any)
				alerts = append(alerts, r["alert"].(string))
				refs := metricRef.FindAllString(r["expr"].(string), -1)
				Expect(refs).NotTo(BeEmpty(), "alert %s reads no Sluice metric", r["alert"])
				for _, ref := range refs {
					Expect(known).To(ContainElement(ref), "alert %s reads %s, which the enforcer does not export", r["alert"], ref)
				}
			}
		}
		Expect(alerts).To(ContainElements("SluiceTrafficSpike", "SluiceDenyRatioHigh", "SluiceFailureModeActive",
			"SluiceEnforcerConfigStale", "SluiceRedisLatencyHigh"))
	})

	It("chart decisions by policy and rule, deny ratio, Redis latency and degraded enforcers from exported metrics", func() {
		data, err := os.ReadFile(filepath.Join(chartDir, "files", "dashboards", "sluice.json"))
		Expect(err).NotTo(HaveOccurred())
		var dashboard struct {
			Panels []struct {
				Title   string
				Targets []struct{ Expr string }
			}
		}
		Expect(json.Unmarshal(data, &dashboard)).To(Succeed(), "the dashboard is not valid JSON")
		known := exported()
		var titles []string
		for _, p := range dashboard.Panels {
			titles = append(titles, p.Title)
			for _, t := range p.Targets {
				for _, ref := range metricRef.FindAllString(t.Expr, -1) {
					Expect(known).To(ContainElement(ref), "panel %q reads %s, which no Sluice program exports", p.Title, ref)
				}
			}
		}
		Expect(titles).To(ContainElements("Decisions by policy and rule", "Deny ratio by rule", "Redis round trip", "Degraded enforcers",
			"Rate limit service calls", "Rate limit service descriptors by domain and rule"))
		Expect(slices.ContainsFunc(titles, func(t string) bool { return strings.TrimSpace(t) == "" })).To(BeFalse())
	})
})
