package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// A policy file the API server would refuse prints no configuration, and
// every problem is on stderr with its field path.
func TestPolicyFileRefusedListsEveryProblem(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	g.Expect(os.WriteFile(path, []byte(`apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: login}
spec:
  selector: {}
  upstreamPort: 8080
  identity: {sources: [{clientIP: {}}, {header: {name: X-Tenant-ID}}]}
  rules:
    - name: Login_Rule
      algorithm: SlidingWindowLog
      limits: [{requests: 5, period: 1d, burst: 10}]
  overrides: [{tenant: acme, rule: exports, limits: [{requests: 1, period: 500ms}]}]
`), 0o644)).To(Succeed())
	var stderr bytes.Buffer
	var stdout bytes.Buffer
	status := run([]string{path}, &stdout, &stderr)
	g.Expect(status).To(Equal(exitRefused), stderr.String())
	g.Expect(stdout.String()).To(BeEmpty())
	g.Expect(stderr.String()).To(And(
		ContainSubstring(path+` document 1: RateLimitPolicy "login" is invalid:`),
		ContainSubstring(`spec.rules[0].name: Invalid value: "Login_Rule"`),
		ContainSubstring(`spec.rules[0].limits[0].period: Invalid value: "1d": period must be a duration such as 30s, 1m, 1h or 24h; there is no day unit`),
		ContainSubstring(`spec.overrides[0].limits[0].period: Invalid value: "500ms": period must be between 1s and 744h`),
		ContainSubstring(`spec.rules[0]: Invalid value: rule Login_Rule uses SlidingWindowLog, which has no burst`),
		ContainSubstring(`spec.identity: Invalid value: clientIP and shared always find a tenant`),
		ContainSubstring(`spec.selector: Invalid value: selector is empty`),
	))
}

// How an override fits its rule is the compiler's to check, once the
// schema admits the policy, as the manager does.
func TestPolicyFileOverrideOfNoRule(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	g.Expect(os.WriteFile(path, []byte(`apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: login}
spec:
  selector: {matchLabels: {app: login}}
  upstreamPort: 8080
  rules: [{name: all, limits: [{requests: 5, period: 1m}]}]
  overrides: [{tenant: acme, rule: exports, limits: [{requests: 1, period: 1m}]}]
`), 0o644)).To(Succeed())
	var stdout, stderr bytes.Buffer
	g.Expect(run([]string{path}, &stdout, &stderr)).To(Equal(exitRefused), stderr.String())
	g.Expect(stdout.String()).To(BeEmpty())
	g.Expect(stderr.String()).To(ContainSubstring("policy login: spec.overrides[0](acme): an override names rule exports, which does not exist: use the name of a rule in spec.rules"))
}

// Policies that compile print the configuration sluice-enforcer --config
// reads, in the namespace given for policies that name none.
func TestPrintsTheCompiledConfiguration(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	api, web := filepath.Join(dir, "api.yaml"), filepath.Join(dir, "web.yaml")
	g.Expect(os.WriteFile(api, []byte(`apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: api}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  rules: [{name: all, limits: [{requests: 5, period: 1m}]}]
`), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(web, []byte(`apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  upstreamPort: 8080
  rules: [{name: pages, limits: [{requests: 100, period: 1s}]}]
`), 0o644)).To(Succeed())
	var stdout, stderr bytes.Buffer
	g.Expect(run([]string{"--namespace", "shop", api, web}, &stdout, &stderr)).To(Equal(exitOK), stderr.String())
	g.Expect(stderr.String()).To(BeEmpty())
	c, err := config.Parse(stdout.Bytes())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Policies).To(HaveLen(2))
	g.Expect(c.Policies[0].Name).To(Equal("api"))
	g.Expect(c.Policies[1].Rules[0].Name).To(Equal("pages"))
	g.Expect(c.Namespace).To(Equal("shop"))
}

// A file that cannot be read is refused with its name; no file at all is a
// command line error.
func TestRefusesMissingFiles(t *testing.T) {
	g := NewWithT(t)
	missing := filepath.Join(t.TempDir(), "absent.yaml")
	var stdout, stderr bytes.Buffer
	g.Expect(run([]string{missing}, &stdout, &stderr)).To(Equal(exitRefused))
	g.Expect(stderr.String()).To(HavePrefix("sluice-policy-compile: load policies: open " + missing))
	g.Expect(stdout.String()).To(BeEmpty())
	stderr.Reset()
	g.Expect(run(nil, &stdout, &stderr)).To(Equal(exitUsage))
	g.Expect(stderr.String()).To(ContainSubstring("no policy file given"))
}

// Unquoted HTTP statuses, as most people write them, are refused with how to
// write them, and the rest of the file is checked in the same pass.
func TestUnquotedStatusesSayHowToQuoteThem(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "login.yaml")
	g.Expect(os.WriteFile(path, []byte(`apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: auth}
spec:
  selector: {matchLabels: {app: auth}}
  upstreamPort: 8080
  rules:
    - name: login
      limits: [{requests: 5, period: 1d}]
      countResponses: {statuses: [401, "5xx", 403]}
`), 0o644)).To(Succeed())
	var stdout, stderr bytes.Buffer
	g.Expect(run([]string{path}, &stdout, &stderr)).To(Equal(exitRefused), stderr.String())
	g.Expect(stderr.String()).To(And(
		ContainSubstring(`spec.rules[0].countResponses.statuses[0]: Invalid value: 401: write HTTP statuses as quoted strings, such as "401" or "5xx"`),
		ContainSubstring(`spec.rules[0].countResponses.statuses[2]: Invalid value: 403: write HTTP statuses`),
		ContainSubstring(`spec.rules[0].limits[0].period: Invalid value: "1d": period must be a duration such as 30s`),
		Not(ContainSubstring("must be of type string")),
		Not(ContainSubstring("<nil>")),
	))
}
