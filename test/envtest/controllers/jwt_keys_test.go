package controllers

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/jwttest"
)

var _ = Describe("jwtClaim key sets", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	// jwtPolicy is the login sample with its tenant read from a verified
	// token claim first.
	jwtPolicy := func(claim v1alpha1.JWTClaimSource) *v1alpha1.RateLimitPolicy {
		policy := samplePolicy("ratelimitpolicy_login_protection.yaml", ns)
		policy.Spec.Identity = &v1alpha1.Identity{Sources: []v1alpha1.IdentitySource{{JWTClaim: &claim}, {ClientIP: &v1alpha1.ClientIPSource{}}}}
		return policy
	}
	publishedKeys := func(ctx SpecContext) string {
		p, ok := publishedPolicies(ctx, ns)["login"]
		if !ok || len(p.Rules) == 0 || p.Rules[0].Identity.Sources[0].JWTClaim == nil || p.Rules[0].Identity.Sources[0].JWTClaim.Verify == nil {
			return ""
		}
		return string(p.Rules[0].Identity.Sources[0].JWTClaim.Verify.JWKS)
	}

	It("compiles a Secret's key set into the configuration, and its rotation", func(ctx SpecContext) {
		policy := jwtPolicy(v1alpha1.JWTClaimSource{Claim: "tenant_id", Keys: &v1alpha1.JWTKeys{SecretRef: &v1alpha1.KeySetReference{Name: "issuer"}}})
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionAccepted) }).
			Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonKeySetMissing, 1))
		Expect(condition(ctx, policy, v1alpha1.ConditionAccepted).Message).To(ContainSubstring("names Secret issuer (key jwks.json), which does not exist"))

		By("creating the Secret")
		first := jwttest.JWKS(GinkgoT(), jwttest.NewEC(GinkgoT(), "k1"))
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "issuer", Namespace: ns}, Data: map[string][]byte{"jwks.json": first}}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionAccepted) }).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCompiled, 1))
		Eventually(func() string { return publishedKeys(ctx) }).Should(MatchJSON(first))

		By("rotating the key in the Secret")
		next := jwttest.JWKS(GinkgoT(), jwttest.NewEC(GinkgoT(), "k2"))
		secret.Data = map[string][]byte{"jwks.json": next}
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		Eventually(func() string { return publishedKeys(ctx) }).Should(MatchJSON(next), "the policy itself was never touched")
	})

	It("warns of tokens read unverified", func(ctx SpecContext) {
		policy := jwtPolicy(v1alpha1.JWTClaimSource{Claim: "tenant_id", Verify: ptr.To(false)})
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionAccepted) }).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCompiledUnverifiedTokens, 1))
		Expect(condition(ctx, policy, v1alpha1.ConditionAccepted).Message).To(ContainSubstring("spec.identity.sources[0].jwtClaim reads tokens with verify: false"))
		Eventually(func() []string { return eventReasons(ctx, policy) }).Should(ContainElement(v1alpha1.ReasonCompiledUnverifiedTokens))
	})
})
