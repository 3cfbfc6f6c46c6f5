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

package compile

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

// checkoutSpec is a rateLimitService policy with what such a policy can
// have: tiers and a tenant from descriptor entries, overrides, a ban.
const checkoutSpec = `
rateLimitService: {domain: edge}
failureMode: Closed
identity: {sources: [{descriptor: {key: user_id}}]}
tiers: {source: {descriptor: {key: plan}}, default: free}
rules:
  - name: checkout
    match: {descriptors: [{key: generic_key, value: checkout}, {key: user_id}, {key: plan}]}
    algorithm: GCRA
    limits:
      - {tier: free, requests: 10, period: 1m}
      - {tier: gold, requests: 100, period: 1m}
    ban: {after: {denials: 5, within: 1m}, durations: [10m]}
  - name: files
    match: {descriptors: [{key: path, value: "/files/*"}, {key: user_id}]}
    limits: [{requests: 5, period: 1s}]
  - name: per-ip
    match: {descriptors: [{key: remote_address}]}
    identity: {sources: [{descriptor: {}}]}
    algorithm: SlidingWindowLog
    limits: [{requests: 100, period: 1h}]
  - name: health
    match: {descriptors: [{key: generic_key, value: health}]}
    exempt: true
overrides:
  - {tenant: acme, rule: checkout, limits: [{requests: 1000, period: 1m}]}
`

// policyOf is a policy of namespace shop with spec, created at second
// created.
func policyOf(t *testing.T, name, spec string, created int64) v1alpha1.RateLimitPolicy {
	t.Helper()
	p := v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name),
		Generation: 1, CreationTimestamp: metav1.Unix(created, 0)}}
	if err := yaml.UnmarshalStrict([]byte(spec), &p.Spec); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServicePolicyCompilesToADomainPolicy(t *testing.T) {
	g := NewWithT(t)
	res, err := Service(ns, []v1alpha1.RateLimitPolicy{policyOf(t, "checkout", checkoutSpec, 1)},
		Options{Replicas: map[string]int32{"checkout": 2}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Errors).To(BeEmpty())
	parsed, err := config.Parse(res.JSON)
	g.Expect(err).NotTo(HaveOccurred(), "the service reads what the compiler writes")
	g.Expect(parsed.Policies).To(HaveLen(1))

	p := parsed.Policies[0]
	g.Expect(p.Name).To(Equal("checkout"))
	g.Expect(p.Domain).To(Equal("edge"))
	g.Expect(p.Salt).To(Equal("uid-checkout"))
	g.Expect(p.Replicas).To(BeEquivalentTo(2), "under LocalFallback each service pod admits its share")
	g.Expect(p.FailureMode).To(Equal(config.FailClosed))
	g.Expect(p.Selector).To(Equal(config.LabelSelector{}), "it selects no pods")
	g.Expect(p.UpstreamPort).To(BeZero())
	g.Expect(p.UpstreamProtocol).To(BeEmpty(), "a domain policy has no say in the upstream protocol")
	g.Expect(p.ResponseHeaders).To(Equal(config.HeadersNone), "Envoy writes the headers")
	g.Expect(p.Tiers).To(Equal(&config.Tiers{Source: config.Source{Descriptor: &config.DescriptorSource{Key: "plan"}}, Default: "free"}))

	checkout := compiledRule(g, p, "checkout")
	g.Expect(checkout.Match).To(Equal(config.Match{Descriptor: []config.DescriptorEntry{
		{Key: "generic_key", Value: "checkout"}, {Key: "user_id"}, {Key: "plan"}}}))
	g.Expect(checkout.Identity).To(Equal(config.Identity{Sources: []config.Source{{Descriptor: &config.DescriptorSource{Key: "user_id"}}}}))
	g.Expect(checkout.Algorithm).To(Equal(config.GCRA))
	g.Expect(checkout.TierLimits).To(Equal(map[string][]config.Limit{
		"free": {window(10, time.Minute)}, "gold": {window(100, time.Minute)}}))
	g.Expect(checkout.Overrides).To(Equal([]config.Override{{Tenant: "acme", Limits: []config.Limit{window(1000, time.Minute)}}}))
	g.Expect(checkout.Ban).NotTo(BeNil())
	g.Expect(checkout.Ban.Durations).To(Equal([]config.Duration{{Duration: 10 * time.Minute}}))

	files := compiledRule(g, p, "files")
	g.Expect(files.Match.Descriptor).To(Equal([]config.DescriptorEntry{{Key: "path", Value: "/files/*"}, {Key: "user_id"}}), "a wildcard as written")
	g.Expect(files.Identity.Sources).To(Equal([]config.Source{{Descriptor: &config.DescriptorSource{Key: "user_id"}}}), "the policy's identity")

	perIP := compiledRule(g, p, "per-ip")
	g.Expect(perIP.Identity.Sources).To(Equal([]config.Source{{Descriptor: &config.DescriptorSource{}}}), "the whole descriptor")
	g.Expect(perIP.Algorithm).To(Equal(config.SlidingWindowLog))

	health := compiledRule(g, p, "health")
	g.Expect(health.Exempt).To(BeTrue())
	g.Expect(health.Match.Descriptor).To(Equal([]config.DescriptorEntry{{Key: "generic_key", Value: "health"}}))
}

// Without identity, a rule of a rateLimitService policy counts each
// distinct descriptor apart, as envoyproxy/ratelimit does: not per client
// IP, which the service does not see.
func TestServicePolicyWithoutIdentityCountsEachDescriptor(t *testing.T) {
	g := NewWithT(t)
	p := policyOf(t, "edge", `{rateLimitService: {domain: edge}, rules: [{name: ip, match: {descriptors: [{key: remote_address}]}, limits: [{requests: 5, period: 1s}]}]}`, 1)
	compiled, err := Policy(&p, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(compiled.Rules[0].Identity).To(Equal(config.Identity{Sources: []config.Source{{Descriptor: &config.DescriptorSource{}}}}))
}

// The enforcers' configuration and the service's hold different policies:
// an enforcer never applies a domain policy, the service never a sidecar's.
func TestSidecarAndServiceConfigurationsAreApart(t *testing.T) {
	g := NewWithT(t)
	policies := []v1alpha1.RateLimitPolicy{policyOf(t, "checkout", checkoutSpec, 1), sample(t, "public-api")}
	sidecar, err := Namespace(ns, policies, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	service, err := Service(ns, policies, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(sidecar.Config)).To(Equal([]string{"public-api"}))
	g.Expect(names(service.Config)).To(Equal([]string{"checkout"}))
	g.Expect(sidecar.Errors).To(BeEmpty())
	g.Expect(service.Errors).To(BeEmpty())
	g.Expect(sidecar.Hash).NotTo(Equal(service.Hash))

	// The same input, in any order, is the same bytes.
	again, err := Service(ns, []v1alpha1.RateLimitPolicy{policies[1], policies[0]}, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.JSON).To(Equal(service.JSON))
}

func names(c *config.Config) []string {
	var out []string
	for _, p := range c.Policies {
		out = append(out, p.Name)
	}
	return out
}

func TestADomainBelongsToTheOldestPolicy(t *testing.T) {
	spec := func(domain string) string {
		return `{rateLimitService: {domain: ` + domain + `}, rules: [{name: api, match: {descriptors: [{key: k}]}, limits: [{requests: 5, period: 1s}]}]}`
	}
	cases := []struct {
		name     string
		policies []v1alpha1.RateLimitPolicy
		previous *config.Config
		holder   string
	}{
		{"the one created first", []v1alpha1.RateLimitPolicy{policyOf(t, "a", spec("edge"), 2), policyOf(t, "b", spec("edge"), 1)}, nil, "b"},
		{"created in the same second: by name", []v1alpha1.RateLimitPolicy{policyOf(t, "b", spec("edge"), 1), policyOf(t, "a", spec("edge"), 1)}, nil, "a"},
		{"created in the same second: the one published already",
			[]v1alpha1.RateLimitPolicy{policyOf(t, "b", spec("edge"), 1), policyOf(t, "a", spec("edge"), 1)},
			&config.Config{Policies: []config.Policy{{Name: "b", UID: "uid-b", Domain: "edge"}}}, "b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			res, err := Service(ns, tc.policies, Options{Previous: tc.previous})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(names(res.Config)).To(Equal([]string{tc.holder}))
			other := "a"
			if tc.holder == "a" {
				other = "b"
			}
			g.Expect(res.Errors).To(HaveLen(1))
			pe := res.Errors[other]
			g.Expect(pe).To(HaveOccurred())
			g.Expect(pe.Reason).To(Equal(v1alpha1.ReasonConflictingDomains))
			g.Expect(pe.Message).To(ContainSubstring("policy " + tc.holder + ", created before, holds rateLimitService.domain edge"))
			g.Expect(DomainConflicts(tc.policies, tc.previous)).To(Equal(res.Errors), "the controller reads the same conflicts")
		})
	}

	t.Run("other domains do not conflict", func(t *testing.T) {
		g := NewWithT(t)
		res, err := Service(ns, []v1alpha1.RateLimitPolicy{policyOf(t, "a", spec("edge"), 1), policyOf(t, "b", spec("internal"), 1)}, Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Errors).To(BeEmpty())
		g.Expect(names(res.Config)).To(Equal([]string{"a", "b"}))
	})

	t.Run("a refused policy keeps no previous entry", func(t *testing.T) {
		g := NewWithT(t)
		prev, err := Service(ns, []v1alpha1.RateLimitPolicy{policyOf(t, "b", spec("internal"), 2)}, Options{})
		g.Expect(err).NotTo(HaveOccurred())
		// b moves to a's domain: a keeps it, and b's entry for internal goes.
		res, err := Service(ns, []v1alpha1.RateLimitPolicy{policyOf(t, "a", spec("edge"), 1), policyOf(t, "b", spec("edge"), 2)},
			Options{Previous: prev.Config})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(names(res.Config)).To(Equal([]string{"a"}))
		g.Expect(res.Config.Validate()).To(Succeed())
	})

	t.Run("the holder that fails keeps its previous entry", func(t *testing.T) {
		g := NewWithT(t)
		a := policyOf(t, "a", spec("edge"), 1)
		prev, err := Service(ns, []v1alpha1.RateLimitPolicy{a}, Options{})
		g.Expect(err).NotTo(HaveOccurred())
		a.Spec.Storage = &v1alpha1.Storage{SecretRef: &v1alpha1.SecretKeyReference{Name: "missing"}}
		a.Generation = 2
		res, err := Service(ns, []v1alpha1.RateLimitPolicy{a, policyOf(t, "b", spec("edge"), 2)}, Options{Previous: prev.Config})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Errors["a"].Reason).To(Equal(v1alpha1.ReasonStorageSecretMissing))
		g.Expect(res.Errors["b"].Reason).To(Equal(v1alpha1.ReasonConflictingDomains))
		g.Expect(res.Config.Policies).To(HaveLen(1))
		g.Expect(res.Config.Policies[0].Generation).To(BeEquivalentTo(1), "a's last published generation still answers edge")
	})
}

// What CEL cannot see, the compiler reports with the path of the field.
func TestServicePolicyProblems(t *testing.T) {
	cases := map[string]struct{ spec, want string }{
		"two rules on one descriptor": {`{rateLimitService: {domain: edge}, rules: [
			{name: a, match: {descriptors: [{key: k}]}, limits: [{requests: 5, period: 1s}]},
			{name: b, match: {descriptors: [{key: k}]}, limits: [{requests: 9, period: 1s}]}]}`,
			"spec.rules[1](b).match.descriptor: the same path as rules[0](a)"},
		"an identity key the rule's descriptors do not have": {`{rateLimitService: {domain: edge}, identity: {sources: [{descriptor: {key: user_id}}]},
			rules: [{name: a, match: {descriptors: [{key: k}]}, limits: [{requests: 5, period: 1s}]}]}`,
			`spec.rules[0](a).identity.sources[0].descriptor.key: "user_id" is no key of the rule's descriptor path, so it never names a tenant`},
		"an override of a tenant no source names": {`{rateLimitService: {domain: edge},
			rules: [{name: a, match: {descriptors: [{key: k}]}, limits: [{requests: 5, period: 1s}]}],
			overrides: [{tenant: acme, rule: a, limits: [{requests: 50, period: 1s}]}]}`,
			"spec.rules[0](a).overrides: an override names a tenant, and no identity source of the rule names one"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			p := policyOf(t, "edge", tc.spec, 1)
			res, err := Service(ns, []v1alpha1.RateLimitPolicy{p}, Options{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Config.Policies).To(BeEmpty())
			g.Expect(res.Errors).To(HaveKey("edge"))
			g.Expect(res.Errors["edge"].Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
			g.Expect(res.Errors["edge"].Message).To(ContainSubstring(tc.want))
		})
	}
}
