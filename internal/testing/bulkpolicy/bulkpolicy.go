// Package bulkpolicy builds the large inputs the size limits are measured
// and tested with: a namespace of many policies, and one policy with many
// per-tenant overrides. Compile tests, the envtest suites and the enforcer
// tests use the same objects, so the figures in docs/operations.md and
// docs/performance.md are those of what the tests load.
package bulkpolicy

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// Rule is the rule every override of Overrides replaces the limits of.
const Rule = "api"

// RuleLimit is what Overrides' rule allows a tenant without an override,
// per minute.
const RuleLimit = 60

// LastOverrideLimit is what the last override of Overrides allows its
// tenant per minute: lower than the rule's, so that a test sees it applied.
const LastOverrideLimit = 2

// TenantHeader carries the tenant in Overrides' policy.
const TenantHeader = "X-Tenant-ID"

// Tenant is the tenant of override i: UUID-shaped, 36 characters, as
// customer identifiers commonly are (the sizes measured depend on it).
func Tenant(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// Namespace returns n sidecar policies like config/samples' public-api, each
// selecting its own app (app.kubernetes.io/name: svc-NNNN), named
// policy-NNNN: two token-bucket rules, one of them with a path match and a
// delay.
func Namespace(namespace string, n int) []v1alpha1.RateLimitPolicy {
	out := make([]v1alpha1.RateLimitPolicy, n)
	for i := range n {
		name := fmt.Sprintf("policy-%04d", i)
		out[i] = v1alpha1.RateLimitPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RateLimitPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: v1alpha1.RateLimitPolicySpec{
				Selector:     metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": fmt.Sprintf("svc-%04d", i)}},
				UpstreamPort: 8080,
				Identity: &v1alpha1.Identity{Sources: []v1alpha1.IdentitySource{
					{APIKey: &v1alpha1.APIKeySource{Header: "X-API-Key"}},
					{ClientIP: &v1alpha1.ClientIPSource{TrustedProxies: []string{"10.244.7.0/24"}}},
				}},
				Rules: []v1alpha1.Rule{
					{Name: "api", Algorithm: v1alpha1.AlgorithmTokenBucket, Limits: []v1alpha1.Limit{perMinute(60)}},
					{
						Name:      "search",
						Match:     &v1alpha1.RequestMatch{Paths: []v1alpha1.PathMatch{{Prefix: "/v1/search"}}},
						Algorithm: v1alpha1.AlgorithmTokenBucket,
						Limits:    []v1alpha1.Limit{{Requests: 20, Period: metav1.Duration{Duration: time.Second}}},
						OnLimit:   &v1alpha1.OnLimit{Delay: &v1alpha1.Delay{Max: metav1.Duration{Duration: 500 * time.Millisecond}}},
					},
				},
			},
		}
	}
	return out
}

// Overrides returns sidecar policy name, selecting app.kubernetes.io/name:
// name, whose one rule (Rule) allows RuleLimit requests a minute per
// tenant of header TenantHeader, with n overrides: tenant Tenant(i) gets
// 1000+i a minute, but the last, which gets LastOverrideLimit.
func Overrides(namespace, name string, n int) *v1alpha1.RateLimitPolicy {
	p := &v1alpha1.RateLimitPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RateLimitPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.RateLimitPolicySpec{
			Selector:     metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": name}},
			UpstreamPort: 8080,
			Identity:     &v1alpha1.Identity{Sources: []v1alpha1.IdentitySource{{Header: &v1alpha1.HeaderSource{Name: TenantHeader}}}},
			Rules:        []v1alpha1.Rule{{Name: Rule, Algorithm: v1alpha1.AlgorithmTokenBucket, Limits: []v1alpha1.Limit{perMinute(RuleLimit)}}},
			Overrides:    make([]v1alpha1.Override, n),
		},
	}
	for i := range n {
		limit := int64(1000 + i)
		if i == n-1 {
			limit = LastOverrideLimit
		}
		p.Spec.Overrides[i] = v1alpha1.Override{Tenant: Tenant(i), Rule: Rule, Limits: []v1alpha1.Limit{perMinute(limit)}}
	}
	return p
}

func perMinute(n int64) v1alpha1.Limit {
	return v1alpha1.Limit{Requests: n, Period: metav1.Duration{Duration: time.Minute}}
}
