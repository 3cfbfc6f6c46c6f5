package enforcer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/jwttest"
)

// bearer is the Authorization header carrying tok.
func bearer(tok string) string { return "Authorization: Bearer " + tok }

// TestForgedTokensAreNoTenant: a token that does not verify names neither a
// tenant nor a tier. Minting a token per request with a fresh tenant gets no
// fresh bucket, and writing plan: enterprise into one's own token gets no
// top tier: the client address and the default tier decide.
func TestForgedTokensAreNoTenant(t *testing.T) {
	key := jwttest.NewRSA(t, "k1")
	forger := jwttest.NewRSA(t, "k1")
	srv := jwttest.Serve(t, key)
	keys := fmt.Sprintf(`keys: {jwksURL: %q}, issuer: "https://issuer.example", audiences: [api]`, srv.URL)
	e := start(t, setup{policies: policy("tokens", `  identity: {sources: [{jwtClaim: {claim: tenant_id, `+keys+`}}, {clientIP: {}}]}
  tiers: {source: {jwtClaim: {claim: plan, `+keys+`}}, default: free}
  rules:
    - name: api
      algorithm: FixedWindow
      limits: [{tier: free, requests: 3, period: 1h}, {tier: enterprise, requests: 100, period: 1h}]`)})

	claims := func(tenant string, extra map[string]any) map[string]any {
		c := jwttest.Claims(tenant, map[string]any{"iss": "https://issuer.example", "aud": "api", "plan": "enterprise"})
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	g := NewWithT(t)
	r := get(t, e.url, bearer(key.Sign(t, claims("acme", nil))))
	g.Expect(r.status).To(Equal(200))
	g.Expect(r.header.Get("X-RateLimit-Limit")).To(Equal("100"), "a valid token's tier")
	g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("99"), "a valid token's tenant")

	past := time.Now().Add(-time.Hour).Unix()
	forged := map[string]string{
		"another key":     forger.Sign(t, claims("mallory-1", nil)),
		"expired":         key.Sign(t, claims("mallory-2", map[string]any{"exp": past})),
		"wrong audience":  key.Sign(t, claims("mallory-3", map[string]any{"aud": "billing"})),
		"wrong issuer":    key.Sign(t, claims("mallory-4", map[string]any{"iss": "https://evil.example"})),
		"alg none":        jwttest.Unsigned(claims("mallory-5", nil)),
		"HMAC confusion":  key.HMACConfused(t, claims("mallory-6", nil)),
		"not yet valid":   key.Sign(t, claims("mallory-7", map[string]any{"nbf": time.Now().Add(time.Hour).Unix()})),
		"unsigned header": jwt(`{"tenant_id":"mallory-8","plan":"enterprise","iss":"https://issuer.example","aud":"api"}`),
	}
	statuses := map[int]int{}
	for name, tok := range forged {
		r := get(t, e.url, bearer(tok))
		g.Expect(r.header.Get("X-RateLimit-Limit")).To(Equal("3"), "%s: the default tier", name)
		statuses[r.status]++
	}
	g.Expect(statuses).To(Equal(map[int]int{200: 3, 429: len(forged) - 3}), "every forged token counts in the client address's one bucket")
	g.Expect(get(t, e.url, bearer(key.Sign(t, claims("acme", map[string]any{"sub": "u2"})))).header.Get("X-RateLimit-Remaining")).
		To(Equal("98"), "the valid tenant keeps its own bucket")
}

// TestJWKSRotationAndOutage: a key the issuer rotates in is fetched when a
// token names its kid; with the key set's server down, the keys fetched
// before keep verifying, and a token whose key cannot be fetched falls to
// the next source.
func TestJWKSRotationAndOutage(t *testing.T) {
	g := NewWithT(t)
	old, next := jwttest.NewRSA(t, "old"), jwttest.NewEC(t, "next")
	srv := jwttest.Serve(t, old)
	e := start(t, setup{policies: policy("rotation", fmt.Sprintf(`  identity: {sources: [{jwtClaim: {claim: tenant_id, keys: {jwksURL: %q}}}, {clientIP: {}}]}
  rules:
    - name: api
      algorithm: FixedWindow
      limits: [{requests: 100, period: 1h}]`, srv.URL))})
	remaining := func(headers ...string) string {
		return get(t, e.url, headers...).header.Get("X-RateLimit-Remaining")
	}
	g.Expect(remaining()).To(Equal("99"), "no token: the client address's bucket")
	g.Expect(remaining(bearer(old.Sign(t, jwttest.Claims("acme", nil))))).To(Equal("99"), "acme's own bucket")
	g.Expect(remaining(bearer(next.Sign(t, jwttest.Claims("beta", nil))))).To(Equal("98"), "a key not yet published: the client address")

	srv.Rotate(t, old, next)
	// The unknown kid was refreshed for a moment ago: the next refresh is
	// allowed within the bounded interval.
	g.Eventually(func() string { return remaining(bearer(next.Sign(t, jwttest.Claims("gamma", nil)))) },
		15*time.Second, time.Second).Should(Equal("99"), "gamma's own bucket once the rotated key is fetched")

	srv.Stop()
	g.Expect(remaining(bearer(next.Sign(t, jwttest.Claims("delta", map[string]any{"sub": "fresh"}))))).To(Equal("99"),
		"the key set fetched before keeps verifying while its server is down")
	ip, err := strconv.Atoi(remaining())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remaining(bearer(jwttest.NewRSA(t, "unknown").Sign(t, jwttest.Claims("epsilon", nil))))).
		To(Equal(strconv.Itoa(ip-1)), "a token whose key cannot be fetched is no tenant: the client address's bucket")
}

// TestJWKSDownAtStart: before any fetch succeeds no token verifies, so the
// next source decides; the enforcer starts all the same. A key set compiled
// into the configuration (from a Secret or ConfigMap) needs no fetch.
func TestJWKSDownAtStart(t *testing.T) {
	g := NewWithT(t)
	key := jwttest.NewRSA(t, "k1")
	down := jwttest.Serve(t, key)
	down.Stop()
	e := start(t, setup{policies: policy("down", fmt.Sprintf(`  identity: {sources: [{jwtClaim: {claim: tenant_id, keys: {jwksURL: %q}}}, {clientIP: {}}]}
  rules:
    - name: api
      algorithm: FixedWindow
      limits: [{requests: 10, period: 1h}]`, down.URL))})
	g.Expect(get(t, e.url).header.Get("X-RateLimit-Remaining")).To(Equal("9"))
	g.Expect(get(t, e.url, bearer(key.Sign(t, jwttest.Claims("acme", nil)))).header.Get("X-RateLimit-Remaining")).To(Equal("8"))

	compiled := config.Config{Schema: config.Schema, Namespace: "default", Policies: []config.Policy{{
		Name: "inline", Generation: 1, Selector: config.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
		UpstreamPort: 8080, Mode: config.ModeEnforce, FailureMode: config.FailOpen, Timeout: config.Duration{Duration: time.Second},
		ResponseHeaders: config.HeadersBoth,
		Rules: []config.Rule{{Name: "api", Algorithm: config.FixedWindow, Cost: 1,
			Identity: config.Identity{Sources: []config.Source{
				{JWTClaim: &config.JWTClaimSource{Claim: "tenant_id", Header: "Authorization", Verify: &config.JWTVerify{JWKS: jwttest.JWKS(t, key)}}},
				{ClientIP: &config.ClientIPSource{}}}},
			Limits: []config.Limit{{Requests: 10, Period: config.Duration{Duration: time.Hour}}}}},
	}}}
	data, err := json.Marshal(compiled)
	g.Expect(err).NotTo(HaveOccurred())
	inline := start(t, setup{config: string(data)})
	g.Expect(get(t, inline.url).header.Get("X-RateLimit-Remaining")).To(Equal("9"))
	g.Expect(get(t, inline.url, bearer(key.Sign(t, jwttest.Claims("acme", nil)))).header.Get("X-RateLimit-Remaining")).To(Equal("9"), "acme's own bucket")
	g.Expect(get(t, inline.url, bearer(jwttest.NewRSA(t, "k1").Sign(t, jwttest.Claims("acme", nil)))).header.Get("X-RateLimit-Remaining")).To(Equal("8"), "forged: the client address")
}
