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

package policyfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

const twoPolicies = `# the public API
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: public-api, namespace: shop}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  rules:
    - name: api
      limits: [{requests: 60, period: 1m}]
---
# comments only
---
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: login}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  failureMode: Closed
  rules:
    - name: login
      limits: [{requests: 5, period: 1m}]
`

func TestParseAppliesTheCRDDefaults(t *testing.T) {
	g := NewWithT(t)
	ps, err := Parse([]byte(twoPolicies))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ps).To(HaveLen(2))
	g.Expect(ps[0].Name).To(Equal("public-api"))
	g.Expect(ps[0].Spec.Mode).To(Equal(v1alpha1.ModeEnforce), "defaults applied")
	g.Expect(ps[0].Spec.UpstreamProtocol).To(Equal(v1alpha1.UpstreamProtocolHTTP1))
	g.Expect(ps[0].Spec.FailureMode).To(BeEmpty(), "the compiler applies the default failure mode")
	g.Expect(ps[0].Spec.Rules[0].Algorithm).To(Equal(v1alpha1.DefaultAlgorithm))
	g.Expect(ps[0].Spec.Timeout.Duration).To(Equal(v1alpha1.DefaultTimeout))
	g.Expect(ps[0].Generation).To(Equal(int64(1)))
	g.Expect(ps[1].Spec.FailureMode).To(Equal(v1alpha1.FailureModeClosed))

	// What the schema defaults and what ApplyDefaults sets agree.
	defaulted := ps[0].DeepCopy()
	defaulted.ApplyDefaults()
	g.Expect(defaulted.Spec).To(Equal(ps[0].Spec))
}

// policy is a RateLimitPolicy document with the given spec, written as a
// user would write it.
func policy(name, spec string) string {
	return "apiVersion: sluice.dev/v1alpha1\nkind: RateLimitPolicy\nmetadata: {name: " + name + ", namespace: shop}\nspec: " + spec + "\n"
}

const (
	selector = `selector: {matchLabels: {app: api}}, upstreamPort: 8080`
	apiRule  = `{name: api, limits: [{requests: 60, period: 1m}]}`
)

// refused are the problems the API server reports for each policy of
// testdata/refused.yaml, by name (test/envtest holds them to a real API
// server's answer).
var refused = map[string][]string{
	"client-ip-first": {
		`spec.identity: Invalid value: clientIP and shared always find a tenant, so sources after them are never used: put one of them last, and only one`},
	"burst-on-log": {
		`spec.rules[0]: Invalid value: rule api uses SlidingWindowLog, which has no burst: remove burst from its limits, or use algorithm TokenBucket or GCRA`},
	"log-over-100000": {
		`spec.rules[0]: Invalid value: rule api uses SlidingWindowLog, which stores one entry per request: keep each limit at or below 100000 requests per period, or use SlidingWindowCounter`},
	"rule-name": {
		`spec.rules[0].name: Invalid value: "Login_Rule": spec.rules[0].name in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'`},
	"override-same-period": {
		`spec.overrides[0]: Invalid value: two limits of this override have the same period: keep one limit per period`},
	"empty-selector": {
		`spec.selector: Invalid value: selector is empty and would select every pod of the namespace: add matchLabels or matchExpressions`},
	"period-500ms": {
		`spec.rules[0].limits[0].period: Invalid value: "500ms": period must be between 1s and 744h (31 days), for example 1m, 1h or 24h`},
	"period-1d": {
		`spec.rules[0].limits[0].period: Invalid value: "1d": period must be a duration such as 30s, 1m, 1h or 24h; there is no day unit: write 24h for a day`},
	"tier-without-tiers": {
		`spec.rules: Invalid value: limits of rule api name a tier but spec.tiers is not set: add spec.tiers to say where the tier of a request comes from, or remove tier from the limits`},
	"no-default-tier-limit": {
		`spec.rules: Invalid value: rule api has limits for named tiers only and none for the default tier free: add a limit for tier free, or a limit without a tier, which then applies to every tier the rule does not name`},
	"every-problem": {
		`spec.rules[0].name: Invalid value: "Login_Rule": spec.rules[0].name in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'`,
		`spec.rules[0].limits[0].period: Invalid value: "500ms": period must be between 1s and 744h (31 days), for example 1m, 1h or 24h`,
		`spec.selector: Invalid value: selector is empty and would select every pod of the namespace: add matchLabels or matchExpressions`},
	"unknown-mode": {
		`spec.mode: Unsupported value: "Sometimes": supported values: "Enforce", "DryRun"`,
		`<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation`},
	"unknown-upstream-protocol": {
		`spec.upstreamProtocol: Unsupported value: "HTTP2": supported values: "HTTP1", "H2C"`,
		`<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation`},
	"grpc-service-path": {
		`spec.rules[0].match.grpc[0].service: Invalid value: "/shop.v1.Orders/Create": service must be a fully qualified gRPC service name such as shop.v1.Orders: identifiers (letters, digits and _, not starting with a digit) separated by dots, without a leading /`},
	"grpc-method-path": {
		`spec.rules[0].match.grpc[0].method: Invalid value: "Create/Bulk": method must be the name of a gRPC method such as Create: letters, digits and _, not starting with a digit, without the service or a /`},
	"grpc-without-post": {
		`spec.rules[0].match: Invalid value: gRPC calls are POST requests, so the grpc entries of a match whose methods leave out POST match nothing: add POST to methods, remove methods, or put the gRPC calls in a rule of their own`},
	"selector-and-service": {
		`spec: Invalid value: selector and rateLimitService are both set, but a policy is applied either by the enforcer sidecar of the pods its selector selects or by the rate limit service that Envoy calls for rateLimitService.domain: remove one of them, or write one policy for each`},
	"service-delay": {
		`spec.rules: Invalid value: rule api of a rateLimitService policy has onLimit.delay, but Envoy waits only a short timeout for the answer of the rate limit service and cannot hold a call until capacity comes: remove onLimit.delay, so that calls over the limit are refused at once, or limit these requests with an enforcer sidecar policy (selector)`},
	"sidecar-descriptors": {
		`spec.rules: Invalid value: rule api matches descriptors, which only the rate limit service receives from Envoy: set spec.rateLimitService instead of selector and upstreamPort, or match requests with hosts, methods, paths or grpc`},
	"Bad_Name": {
		`metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
}

func TestParseRefusesWhatTheAPIServerRefuses(t *testing.T) {
	data, err := os.ReadFile("testdata/refused.yaml")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	docs := strings.Split(string(data), "\n---\n")
	NewWithT(t).Expect(docs).To(HaveLen(len(refused)))
	for _, doc := range docs {
		_, err := Parse([]byte(doc))
		var invalid *InvalidError
		NewWithT(t).Expect(errors.As(err, &invalid)).To(BeTrue(), "want an InvalidError, got %v", err)
		t.Run(invalid.Name, func(t *testing.T) {
			g := NewWithT(t)
			want, ok := refused[invalid.Name]
			g.Expect(ok).To(BeTrue(), "no expected errors for %s", invalid.Name)
			var got []string
			for _, e := range invalid.Errs {
				got = append(got, e.Error())
			}
			// CEL rules of sibling fields run in map order, as in the API
			// server, which does not list them in one order either.
			g.Expect(got).To(ConsistOf(want))
			g.Expect(err.Error()).To(HavePrefix(`document 1: RateLimitPolicy "` + invalid.Name + `" is invalid:`))
		})
	}
}

func TestParseRefusesUnknownFieldsAsStrictValidationDoes(t *testing.T) {
	g := NewWithT(t)
	_, err := Parse([]byte(policy("p", `{`+selector+`, spek: 1, rules: [{name: api, limitz: [], limits: [{requests: 60, period: 1m}]}]}`)))
	g.Expect(err).To(MatchError(`document 1: RateLimitPolicy in version "v1alpha1" cannot be handled as a RateLimitPolicy: ` +
		`strict decoding error: unknown field "spec.rules[0].limitz", unknown field "spec.spek"`))

	_, err = Parse([]byte(policy("p", `{`+selector+`, rules: [`+apiRule+`], rules: []}`)))
	g.Expect(err).To(MatchError(ContainSubstring(`key "rules" already set in map`)))
}

func TestParseRefusesWhatIsNoPolicy(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n":                      "want apiVersion sluice.dev/v1alpha1 and kind RateLimitPolicy",
		"apiVersion: sluice.dev/v1alpha1\nkind: RateLimitPolicy\nspec: {rules: []}\n": "metadata.name: Required value: name or generateName is required",
		"apiVersion: sluice.dev/v1alpha1\n  kind: [":                                  "document 1",
	} {
		_, err := Parse([]byte(in))
		g.Expect(err).To(MatchError(ContainSubstring(want)), in)
	}
}

func TestParseReportsEveryDocument(t *testing.T) {
	g := NewWithT(t)
	_, err := Parse([]byte(policy("a", `{selector: {}, upstreamPort: 8080, rules: [`+apiRule+`]}`) + "---\n" +
		policy("b", `{`+selector+`, rules: [{name: api, limits: [{requests: 60, period: 1d}]}]}`)))
	g.Expect(err).To(MatchError(And(
		ContainSubstring("document 1: RateLimitPolicy \"a\" is invalid:\n  spec.selector: Invalid value: selector is empty"),
		ContainSubstring("document 2: RateLimitPolicy \"b\" is invalid:\n  spec.rules[0].limits[0].period: Invalid value: \"1d\""))))
}

func TestTheSamplesAreAccepted(t *testing.T) {
	g := NewWithT(t)
	samples, err := filepath.Glob("../../config/samples/ratelimitpolicy_*.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(samples).NotTo(BeEmpty())
	for _, path := range samples {
		_, policies, err := Load("demo", path)
		g.Expect(err).NotTo(HaveOccurred(), path)
		g.Expect(policies).NotTo(BeEmpty(), path)
	}
}

func TestLoadNamespace(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	g.Expect(os.WriteFile(a, []byte(twoPolicies), 0o644)).To(Succeed())
	ns, ps, err := Load("", a)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ns).To(Equal("shop"))
	g.Expect(ps[1].Namespace).To(Equal("shop"))
	g.Expect(string(ps[1].UID)).To(Equal("file:shop/login"), "stable across processes, so they hash tenants alike")
	g.Expect(ps[1].Generation).To(Equal(int64(1)))

	_, _, err = Load("", a, a)
	g.Expect(err).To(MatchError(ContainSubstring(`policy "public-api" is defined twice`)))

	other := strings.Replace(policy("other", `{`+selector+`, rules: [`+apiRule+`]}`), "namespace: shop", "namespace: web", 1)
	g.Expect(os.WriteFile(b, []byte(other), 0o644)).To(Succeed())
	_, _, err = Load("", a, b)
	g.Expect(err).To(MatchError(ContainSubstring("policy web/other is not in namespace shop")))

	ns, _, err = Load("team", b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ns).To(Equal("web"))
}

func TestParseAcceptsARateLimitServicePolicy(t *testing.T) {
	g := NewWithT(t)
	ps, err := Parse([]byte(policy("edge", `{rateLimitService: {domain: edge}, identity: {sources: [{descriptor: {key: user_id}}]},
		tiers: {source: {descriptor: {key: plan}}, default: free},
		rules: [{name: checkout, match: {descriptors: [{key: generic_key, value: checkout}, {key: user_id}, {key: plan}]},
			limits: [{tier: free, requests: 10, period: 1m}, {tier: gold, requests: 100, period: 1m}]}]}`)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ps).To(HaveLen(1))
	spec := ps[0].Spec
	g.Expect(spec.RateLimitService).To(Equal(&v1alpha1.RateLimitService{Domain: "edge"}))
	g.Expect(spec.Rules[0].Match.Descriptors).To(Equal([]v1alpha1.DescriptorEntryMatch{
		{Key: "generic_key", Value: "checkout"}, {Key: "user_id"}, {Key: "plan"}}))
	g.Expect(spec.Rules[0].Algorithm).To(Equal(v1alpha1.AlgorithmTokenBucket), "the CRD's defaults apply as to any policy")
}
