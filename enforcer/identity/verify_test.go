package identity

import (
	"crypto/sha256"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/jwttest"
)

const peer = "192.0.2.7:1234"

func verifiedClaim(claim string, v *config.JWTVerify) config.Source {
	return config.Source{JWTClaim: &config.JWTClaimSource{Claim: claim, Header: "Authorization", Verify: v}}
}

// tenantOf resolves a request bearing token under sources tokens first,
// then the client address.
func tenantOf(res *Resolver, token string) string {
	return res.Resolve(newRequest("GET", "/", peer, "Authorization: Bearer "+token)).Tenant
}

// A token that does not verify names no tenant: the next source, the
// client address, decides; a valid one names its tenant as before.
func TestUnverifiedTokensFallToTheNextSource(t *testing.T) {
	key := jwttest.NewRSA(t, "k1")
	other := jwttest.NewRSA(t, "k1") // same kid, another key: a forger's
	ec := jwttest.NewEC(t, "e1")
	v := &config.JWTVerify{JWKS: jwttest.JWKS(t, key, ec), Issuer: "https://issuer.example", Audiences: []string{"api"}}
	res, err := New(config.Identity{Sources: []config.Source{verifiedClaim("tenant_id", v), clientIP()}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	good := map[string]any{"iss": "https://issuer.example", "aud": "api"}
	with := func(extra map[string]any) map[string]any {
		c := jwttest.Claims("acme", good)
		for k, val := range extra {
			c[k] = val
		}
		return c
	}
	now := time.Now()
	cases := map[string]struct {
		token string
		want  string
	}{
		"valid RS256":                            {key.Sign(t, with(nil)), "acme"},
		"valid ES256":                            {ec.Sign(t, with(nil)), "acme"},
		"audience among several":                 {key.Sign(t, with(map[string]any{"aud": []string{"web", "api"}})), "acme"},
		"expired within the leeway":              {key.Sign(t, with(map[string]any{"exp": now.Add(-10 * time.Second).Unix()})), "acme"},
		"forged (another key)":                   {other.Sign(t, with(nil)), "192.0.2.7"},
		"expired":                                {key.Sign(t, with(map[string]any{"exp": now.Add(-2 * time.Minute).Unix()})), "192.0.2.7"},
		"not yet valid":                          {key.Sign(t, with(map[string]any{"nbf": now.Add(5 * time.Minute).Unix()})), "192.0.2.7"},
		"wrong audience":                         {key.Sign(t, with(map[string]any{"aud": "other-api"})), "192.0.2.7"},
		"no audience":                            {key.Sign(t, jwttest.Claims("acme", map[string]any{"iss": "https://issuer.example"})), "192.0.2.7"},
		"wrong issuer":                           {key.Sign(t, with(map[string]any{"iss": "https://evil.example"})), "192.0.2.7"},
		"alg none":                               {jwttest.Unsigned(with(nil)), "192.0.2.7"},
		"HMAC with the RSA key":                  {key.HMACConfused(t, with(nil)), "192.0.2.7"},
		"HMAC with the EC key":                   {ec.HMACConfused(t, with(nil)), "192.0.2.7"},
		"unsigned, old style":                    {token(`{"tenant_id":"acme","iss":"https://issuer.example","aud":"api"}`), "192.0.2.7"},
		"claims swapped under a valid signature": {swapPayload(key.Sign(t, with(nil)), key.Sign(t, with(map[string]any{"tenant_id": "victim"}))), "192.0.2.7"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tenantOf(res, c.token)).To(Equal(c.want))
			g.Expect(tenantOf(res, c.token)).To(Equal(c.want), "the second time, from the cache of verified tokens")
		})
	}
}

// swapPayload is a's header and signature around b's payload.
func swapPayload(a, b string) string {
	ah, _, _ := cutLast(a)
	_, bp, _ := cutLast(b)
	_, _, as := cutLast(a)
	return ah + "." + bp + "." + as
}

func cutLast(tok string) (header, payload, signature string) {
	var parts [3]string
	i := 0
	start := 0
	for j := 0; j < len(tok) && i < 2; j++ {
		if tok[j] == '.' {
			parts[i] = tok[start:j]
			i++
			start = j + 1
		}
	}
	parts[2] = tok[start:]
	return parts[0], parts[1], parts[2]
}

// A token of one's own cannot take the top tier: the tier of a token that
// does not verify is the default one.
func TestForgedTokensGetTheDefaultTier(t *testing.T) {
	g := NewWithT(t)
	key := jwttest.NewRSA(t, "k1")
	tiers, err := NewTiers(&config.Tiers{Source: verifiedClaim("plan", &config.JWTVerify{JWKS: jwttest.JWKS(t, key)}), Default: "free"},
		[]string{"free", "enterprise"})
	g.Expect(err).NotTo(HaveOccurred())
	tierOf := func(tok string) string {
		return tiers.Tier(newRequest("GET", "/", peer, "Authorization: Bearer "+tok))
	}
	claims := jwttest.Claims("acme", map[string]any{"plan": "enterprise"})
	g.Expect(tierOf(key.Sign(t, claims))).To(Equal("enterprise"))
	g.Expect(tierOf(jwttest.NewRSA(t, "k1").Sign(t, claims))).To(Equal("free"))
	g.Expect(tierOf(jwttest.Unsigned(claims))).To(Equal("free"))
	g.Expect(tierOf(key.HMACConfused(t, claims))).To(Equal("free"))
}

// A key the issuer rotates in is fetched when a token names its kid.
func TestRotatedJWKSKeyIsPickedUp(t *testing.T) {
	g := NewWithT(t)
	old, next := jwttest.NewRSA(t, "old"), jwttest.NewRSA(t, "next")
	srv := jwttest.Serve(t, old)
	res, err := New(config.Identity{Sources: []config.Source{verifiedClaim("tenant_id", &config.JWTVerify{JWKSURL: srv.URL}), clientIP()}})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(tenantOf(res, old.Sign(t, jwttest.Claims("acme", nil)))).To(Equal("acme"))
	fetched := srv.Fetches()

	srv.Rotate(t, next)
	g.Expect(tenantOf(res, next.Sign(t, jwttest.Claims("beta", nil)))).To(Equal("beta"), "the first token naming the new kid fetches the key set")
	g.Expect(srv.Fetches()).To(Equal(fetched + 1))
	g.Expect(tenantOf(res, old.Sign(t, jwttest.Claims("gamma", nil)))).To(Equal("192.0.2.7"), "the rotated-out key no longer verifies new tokens")
}

// Made-up kids do not make the enforcer fetch the key set per request.
func TestUnknownKIDsRefreshAtABoundedRate(t *testing.T) {
	g := NewWithT(t)
	srv := jwttest.Serve(t, jwttest.NewRSA(t, "k1"))
	res, err := New(config.Identity{Sources: []config.Source{verifiedClaim("tenant_id", &config.JWTVerify{JWKSURL: srv.URL}), clientIP()}})
	g.Expect(err).NotTo(HaveOccurred())
	before := srv.Fetches()
	for i := range 50 {
		forger := jwttest.NewEC(t, "made-up-"+string(rune('a'+i%26)))
		g.Expect(tenantOf(res, forger.Sign(t, jwttest.Claims("x", nil)))).To(Equal("192.0.2.7"))
	}
	g.Expect(srv.Fetches() - before).To(BeNumerically("<=", 2))
}

// With the key set's server down, the keys fetched before keep verifying
// tokens; a token whose key cannot be fetched is not verifiable, and the
// next source decides.
func TestJWKSServerDown(t *testing.T) {
	g := NewWithT(t)
	key := jwttest.NewRSA(t, "k1")
	srv := jwttest.Serve(t, key)
	res, err := New(config.Identity{Sources: []config.Source{verifiedClaim("tenant_id", &config.JWTVerify{JWKSURL: srv.URL}), clientIP()}})
	g.Expect(err).NotTo(HaveOccurred())
	srv.Stop()
	g.Expect(tenantOf(res, key.Sign(t, jwttest.Claims("acme", nil)))).To(Equal("acme"), "a fresh token, verified with the cached key set")
	g.Expect(tenantOf(res, jwttest.NewRSA(t, "k2").Sign(t, jwttest.Claims("acme", nil)))).To(Equal("192.0.2.7"))

	down := jwttest.Serve(t, key)
	down.Stop()
	res, err = New(config.Identity{Sources: []config.Source{verifiedClaim("tenant_id", &config.JWTVerify{JWKSURL: down.URL}), clientIP()}})
	g.Expect(err).NotTo(HaveOccurred(), "a key set that cannot be fetched yet does not refuse the configuration")
	g.Expect(tenantOf(res, key.Sign(t, jwttest.Claims("acme", nil)))).To(Equal("192.0.2.7"))
}

// The cache of verified tokens never outlives a token's exp.
func TestVerifiedTokensExpireFromTheCache(t *testing.T) {
	g := NewWithT(t)
	key := jwttest.NewRSA(t, "k1")
	now := time.Now()
	clock := now
	v, err := newVerifier(&config.JWTVerify{JWKS: jwttest.JWKS(t, key)}, func() time.Time { return clock })
	g.Expect(err).NotTo(HaveOccurred())
	tok := key.Sign(t, jwttest.Claims("acme", map[string]any{"exp": now.Add(10 * time.Second).Unix()}))
	g.Expect(v.verify(tok)).To(BeTrue())
	_, cached := v.verified.Get(sha256.Sum256([]byte(tok)))
	g.Expect(cached).To(BeTrue())
	clock = now.Add(10*time.Second + config.JWTLeeway + time.Second)
	g.Expect(v.verify(tok)).To(BeFalse())
	g.Expect(v.verified.Len()).To(BeZero(), "forged and expired tokens take no place in the cache")
}

func TestVerifyRefusesBadKeySets(t *testing.T) {
	g := NewWithT(t)
	_, err := New(config.Identity{Sources: []config.Source{verifiedClaim("sub", &config.JWTVerify{JWKS: []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`)})}})
	g.Expect(err).To(HaveOccurred())
}

// BenchmarkVerify is the CPU one request's token costs: a signature
// checked (uncached) or a token found in the cache of verified tokens.
func BenchmarkVerify(b *testing.B) {
	for _, alg := range []struct {
		name string
		key  *jwttest.Key
	}{{"RS256", jwttest.NewRSA(b, "k")}, {"ES256", jwttest.NewEC(b, "k")}} {
		v, err := newVerifier(&config.JWTVerify{JWKS: jwttest.JWKS(b, alg.key), Audiences: []string{"api"}}, time.Now)
		if err != nil {
			b.Fatal(err)
		}
		tok := alg.key.Sign(b, jwttest.Claims("acme", map[string]any{"aud": "api"}))
		b.Run(alg.name+"/uncached", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v.verified.Purge()
				if !v.verify(tok) {
					b.Fatal("did not verify")
				}
			}
		})
		b.Run(alg.name+"/cached", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !v.verify(tok) {
					b.Fatal("did not verify")
				}
			}
		})
	}
}

// Rules and tier sources verifying alike share one verifier, so a request
// matching several rules has its token checked once.
func TestVerifiersAreShared(t *testing.T) {
	g := NewWithT(t)
	key := jwttest.NewRSA(t, "k1")
	v := &config.JWTVerify{JWKS: jwttest.JWKS(t, key), Audiences: []string{"api"}}
	a, err := newJWTClaimSource(&config.JWTClaimSource{Claim: "sub", Header: "Authorization", Verify: v})
	g.Expect(err).NotTo(HaveOccurred())
	b, err := newJWTClaimSource(&config.JWTClaimSource{Claim: "plan", Header: "Authorization",
		Verify: &config.JWTVerify{JWKS: jwttest.JWKS(t, key), Audiences: []string{"api"}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.verifier).To(BeIdenticalTo(b.verifier))
	c, err := newJWTClaimSource(&config.JWTClaimSource{Claim: "sub", Header: "Authorization",
		Verify: &config.JWTVerify{JWKS: jwttest.JWKS(t, key), Audiences: []string{"web"}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.verifier).NotTo(BeIdenticalTo(a.verifier), "another audience is another verification")
}
