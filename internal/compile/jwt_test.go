package compile

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/jwttest"
)

// tokenPolicy is the public-api sample with its tenant and tier read from
// tokens verified as keys say.
func tokenPolicy(t *testing.T, claim v1alpha1.JWTClaimSource) v1alpha1.RateLimitPolicy {
	p := sample(t, "public-api")
	p.Spec.Identity = &v1alpha1.Identity{Sources: []v1alpha1.IdentitySource{{JWTClaim: &claim}, {ClientIP: &v1alpha1.ClientIPSource{}}}}
	tier := claim
	tier.Claim = "plan"
	p.Spec.Tiers = &v1alpha1.Tiers{Source: v1alpha1.TierSource{JWTClaim: &tier}, Default: "free"}
	return p
}

func TestJWTClaimVerification(t *testing.T) {
	jwks := jwttest.JWKS(t, jwttest.NewRSA(t, "k1"))
	secretRef := &v1alpha1.JWTKeys{SecretRef: &v1alpha1.KeySetReference{Name: "issuer"}}
	ref := KeySetRef{Kind: "Secret", Name: "issuer", Key: "jwks.json"}

	t.Run("a JWKS URL, issuer and audiences", func(t *testing.T) {
		g := NewWithT(t)
		p := tokenPolicy(t, v1alpha1.JWTClaimSource{Claim: "tenant_id", Keys: &v1alpha1.JWTKeys{JWKSURL: "https://issuer.example/jwks"},
			Issuer: "https://issuer.example", Audiences: []string{"api"}})
		out, err := Policy(&p, Options{})
		g.Expect(err).NotTo(HaveOccurred())
		want := &config.JWTVerify{JWKSURL: "https://issuer.example/jwks", Issuer: "https://issuer.example", Audiences: []string{"api"}}
		g.Expect(out.Rules[0].Identity.Sources[0].JWTClaim.Verify).To(Equal(want))
		g.Expect(out.Tiers.Source.JWTClaim.Verify).To(Equal(want))
	})
	t.Run("a key set held in a Secret is compiled in", func(t *testing.T) {
		g := NewWithT(t)
		p := tokenPolicy(t, v1alpha1.JWTClaimSource{Claim: "tenant_id", Keys: secretRef})
		g.Expect(KeySetRefs(&p)).To(Equal([]KeySetRef{ref}))
		out, err := Policy(&p, Options{KeySets: map[KeySetRef][]byte{ref: append([]byte("\n  "), jwks...)}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.Rules[0].Identity.Sources[0].JWTClaim.Verify.JWKS).To(MatchJSON(jwks))
		g.Expect(out.Problems("spec")).To(BeEmpty())
	})
	t.Run("a missing Secret", func(t *testing.T) {
		g := NewWithT(t)
		p := tokenPolicy(t, v1alpha1.JWTClaimSource{Claim: "tenant_id", Keys: secretRef})
		_, err := Policy(&p, Options{})
		g.Expect(err).To(MatchError(ContainSubstring("spec.identity.sources[0].jwtClaim.keys names Secret issuer (key jwks.json), which does not exist")))
		var pe *PolicyError
		g.Expect(errors.As(err, &pe)).To(BeTrue())
		g.Expect(pe.Reason).To(Equal(v1alpha1.ReasonKeySetMissing))
	})
	t.Run("private or symmetric keys are not copied into a ConfigMap", func(t *testing.T) {
		g := NewWithT(t)
		p := tokenPolicy(t, v1alpha1.JWTClaimSource{Claim: "tenant_id", Keys: secretRef})
		for _, set := range []string{`{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0"}]}`, `{"keys":[]}`, `not json`} {
			_, err := Policy(&p, Options{KeySets: map[KeySetRef][]byte{ref: []byte(set)}})
			g.Expect(err).To(HaveOccurred(), set)
		}
	})
	t.Run("no keys and no verify: false", func(t *testing.T) {
		g := NewWithT(t)
		p := tokenPolicy(t, v1alpha1.JWTClaimSource{Claim: "tenant_id"})
		_, err := Policy(&p, Options{})
		g.Expect(err).To(MatchError(ContainSubstring("verifies tokens but names no keys")))
	})
	t.Run("verify: false reads tokens unverified", func(t *testing.T) {
		g := NewWithT(t)
		p := tokenPolicy(t, v1alpha1.JWTClaimSource{Claim: "tenant_id", Verify: ptr.To(false)})
		out, err := Policy(&p, Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.Rules[0].Identity.Sources[0].JWTClaim.Verify).To(BeNil())
		g.Expect(p.Spec.UnverifiedJWTClaims()).To(Equal([]string{"spec.identity.sources[0].jwtClaim", "spec.tiers.source.jwtClaim"}))
	})
}
