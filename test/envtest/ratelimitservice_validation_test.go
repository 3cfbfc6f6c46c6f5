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

package envtest

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sluicev1alpha1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/policyfile"
)

// createAsWritten sends a RateLimitPolicy with spec exactly as written (no
// selector or upstreamPort filled in) to the API server as a dry run.
func createAsWritten(specYAML string) error {
	spec := map[string]any{}
	Expect(yaml.Unmarshal([]byte(specYAML), &spec)).To(Succeed())
	policy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sluice.dev/v1alpha1",
		"kind":       "RateLimitPolicy",
		"metadata":   map[string]any{"generateName": "policy-", "namespace": namespace},
		"spec":       spec,
	}}
	return k8sClient.Create(ctx, policy, client.DryRunAll)
}

// parseAsWritten admits the same policy as sluice-enforcer --policy-file.
func parseAsWritten(specYAML string) error {
	spec := map[string]any{}
	Expect(yaml.Unmarshal([]byte(specYAML), &spec)).To(Succeed())
	doc, err := yaml.Marshal(map[string]any{
		"apiVersion": "sluice.dev/v1alpha1",
		"kind":       "RateLimitPolicy",
		"metadata":   map[string]any{"name": "policy", "namespace": namespace},
		"spec":       spec,
	})
	Expect(err).NotTo(HaveOccurred())
	_, err = policyfile.Parse(doc)
	return err
}

const (
	// service and sidecar start a spec of each kind.
	service = `rateLimitService: {domain: edge}, `
	sidecar = `selector: {matchLabels: {app: api}}, upstreamPort: 8080, `
	// descriptorRule is a valid rule of a rateLimitService policy.
	descriptorRule = `{name: checkout, match: {descriptors: [{key: generic_key, value: checkout}]}, limits: [{requests: 10, period: 1s}]}`
)

var _ = Describe("RateLimitPolicy rateLimitService validation", func() {
	DescribeTable("rejects what the rate limit service cannot do, with a message that says what to do",
		func(spec, message string) {
			err := createAsWritten(spec)
			GinkgoWriter.Printf("API server: %v\n", err)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
			Expect(parseAsWritten(spec)).To(MatchError(ContainSubstring(message)), "--policy-file refuses it alike")
		},
		Entry("both selector and rateLimitService", `{`+sidecar+service+`rules: [`+apiRule+`]}`,
			"selector and rateLimitService are both set, but a policy is applied either by the enforcer sidecar of the pods its selector selects or by the rate limit service"),
		Entry("neither selector nor rateLimitService", `{rules: [`+apiRule+`]}`,
			"neither selector nor rateLimitService is set: set selector and upstreamPort to limit the requests that reach the selected pods through the enforcer sidecar, or rateLimitService.domain"),
		Entry("a selector without upstreamPort", `{selector: {matchLabels: {app: api}}, rules: [`+apiRule+`]}`,
			"upstreamPort is required with selector: set the port your application listens on"),
		Entry("an empty domain", `{rateLimitService: {domain: ""}, rules: [`+descriptorRule+`]}`,
			"spec.rateLimitService.domain"),
		Entry("onLimit.delay", `{`+service+`rules: [{name: checkout, match: {descriptors: [{key: generic_key}]}, limits: [{requests: 10, period: 1s}], onLimit: {delay: {max: 500ms}}}]}`,
			"rule checkout of a rateLimitService policy has onLimit.delay, but Envoy waits only a short timeout for the answer of the rate limit service and cannot hold a call until capacity comes: remove onLimit.delay"),
		Entry("adaptive", `{`+service+`rules: [{name: checkout, match: {descriptors: [{key: generic_key}]}, limits: [{requests: 10, period: 1s}], adaptive: {target: {latency: 250ms}}}]}`,
			"rule checkout of a rateLimitService policy is adaptive, but the rate limit service never sees the responses of the application, so it cannot follow their latency and error rate: remove adaptive"),
		Entry("descriptors in a sidecar policy", `{`+sidecar+`rules: [`+descriptorRule+`]}`,
			"rule checkout matches descriptors, which only the rate limit service receives from Envoy: set spec.rateLimitService instead of selector and upstreamPort, or match requests with hosts, methods, paths or grpc"),
		Entry("paths in a rateLimitService policy", `{`+service+`rules: [{name: checkout, match: {descriptors: [{key: generic_key}], paths: [{prefix: /checkout}]}, limits: [{requests: 10, period: 1s}]}]}`,
			"rule checkout of a rateLimitService policy matches hosts, methods, paths or grpc, but the rate limit service sees only the descriptors Envoy sends"),
		Entry("methods in a rateLimitService policy", `{`+service+`rules: [{name: checkout, match: {descriptors: [{key: generic_key}], methods: [POST]}, limits: [{requests: 10, period: 1s}]}]}`,
			"rule checkout of a rateLimitService policy matches hosts, methods, paths or grpc"),
		Entry("a rule without descriptors", `{`+service+`rules: [`+apiRule+`]}`,
			"rule api has no match.descriptors, but a rateLimitService policy matches the descriptors of the calls Envoy makes: add the entries the rule matches"),
		Entry("upstreamPort with rateLimitService", `{`+service+`upstreamPort: 8080, rules: [`+descriptorRule+`]}`,
			"upstreamPort is for the enforcer sidecar, which forwards requests to the application; with rateLimitService, Envoy forwards them: remove upstreamPort"),
		Entry("trustedProxies with rateLimitService", `{`+service+`trustedProxies: [10.0.0.0/24], rules: [`+descriptorRule+`]}`,
			"trustedProxies are for the enforcer sidecar"),
		Entry("a header identity in a rateLimitService policy", `{`+service+`identity: {sources: [{header: {name: X-Tenant}}]}, rules: [`+descriptorRule+`]}`,
			"a rateLimitService policy finds tenants in the entries of the descriptors Envoy sends: use the identity sources descriptor"),
		Entry("a rule's clientIP identity in a rateLimitService policy", `{`+service+`rules: [{name: checkout, match: {descriptors: [{key: generic_key}]}, identity: {sources: [{clientIP: {}}]}, limits: [{requests: 10, period: 1s}]}]}`,
			"a rateLimitService policy finds tenants in the entries of the descriptors Envoy sends"),
		Entry("partitionBy in a rateLimitService policy", `{`+service+`identity: {sources: [{descriptor: {key: user}}], partitionBy: [Path]}, rules: [`+descriptorRule+`]}`,
			"partitionBy splits budgets by the method, path or host of the request, which a rateLimitService policy does not see"),
		Entry("a descriptor identity in a sidecar policy", `{`+sidecar+`identity: {sources: [{descriptor: {key: user}}]}, rules: [`+apiRule+`]}`,
			"the identity source descriptor reads the descriptors Envoy sends to the rate limit service, which an enforcer sidecar policy never receives"),
		Entry("a header tier in a rateLimitService policy", `{`+service+`tiers: {source: {header: {name: X-Plan}}, default: free}, rules: [`+descriptorRule+`]}`,
			"a rateLimitService policy reads the tier from an entry of the descriptors Envoy sends: set tiers.source.descriptor.key"),
		Entry("a descriptor tier in a sidecar policy", `{`+sidecar+`tiers: {source: {descriptor: {key: plan}}, default: free}, rules: [`+apiRule+`]}`,
			"tiers.source.descriptor reads the descriptors Envoy sends to the rate limit service, which an enforcer sidecar policy never receives"),
		Entry("a descriptor tier without a key", `{`+service+`tiers: {source: {descriptor: {}}, default: free}, rules: [`+descriptorRule+`]}`,
			"a tier is the value of one descriptor entry: set descriptor.key"),
		Entry("an identity source with descriptor and another member", `{`+service+`identity: {sources: [{descriptor: {key: user}, shared: {}}]}, rules: [`+descriptorRule+`]}`,
			"an identity source sets exactly one of header, apiKey, jwtClaim, clientIP, shared or descriptor"),
	)

	It("accepts a rateLimitService policy with tiers, overrides, bans and wildcards", func() {
		spec := `{rateLimitService: {domain: edge}, failureMode: LocalFallback,
			identity: {sources: [{descriptor: {key: user_id}}, {shared: {}}]},
			tiers: {source: {descriptor: {key: plan}}, default: free},
			rules: [
				{name: checkout, match: {descriptors: [{key: generic_key, value: checkout}, {key: user_id}, {key: plan}]},
				 algorithm: GCRA, limits: [{tier: free, requests: 10, period: 1m}, {tier: gold, requests: 100, period: 1m}],
				 ban: {after: {denials: 5, within: 1m}, durations: [10m]}},
				{name: files, match: {descriptors: [{key: path, value: "/files/*"}]}, identity: {sources: [{descriptor: {}}]},
				 algorithm: SlidingWindowCounter, limits: [{requests: 5, period: 1s}]},
				{name: health, match: {descriptors: [{key: generic_key, value: health}]}, exempt: true}],
			overrides: [{tenant: acme, rule: checkout, limits: [{requests: 1000, period: 1m}]}]}`
		Expect(createAsWritten(spec)).To(Succeed())
		Expect(parseAsWritten(spec)).To(Succeed(), "--policy-file accepts it alike")
	})

	It("stores a rateLimitService policy written with the Go types without a selector", func() {
		p := &sluicev1alpha1.RateLimitPolicy{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "edge-", Namespace: namespace},
			Spec: sluicev1alpha1.RateLimitPolicySpec{
				RateLimitService: &sluicev1alpha1.RateLimitService{Domain: "typed"},
				Rules: []sluicev1alpha1.Rule{{
					Name:   "checkout",
					Match:  &sluicev1alpha1.RequestMatch{Descriptors: []sluicev1alpha1.DescriptorEntryMatch{{Key: "generic_key", Value: "checkout"}}},
					Limits: []sluicev1alpha1.Limit{{Requests: 10, Period: metav1.Duration{Duration: 60e9}}},
				}},
			},
		}
		Expect(k8sClient.Create(ctx, p)).To(Succeed(), "an empty selector and upstreamPort are left out, not sent empty")
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(sluicev1alpha1.GroupVersion.WithKind("RateLimitPolicy"))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		_, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "selector")
		Expect(found).To(BeFalse())
		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
	})
})
