package enforcer

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestClientIPBehindTrustedProxy: X-Forwarded-For names the client only
// when the connection comes from a trusted proxy; otherwise a client could
// claim any address and escape its limit.
func TestClientIPBehindTrustedProxy(t *testing.T) {
	spec := func(trusted string) string {
		return `  identity: {sources: [{clientIP: {trustedProxies: [` + trusted + `]}}]}
  rules:
    - name: ip
      algorithm: FixedWindow
      limits: [{requests: 1, period: 1h}]`
	}
	t.Run("trusted proxy", func(t *testing.T) {
		g := NewWithT(t)
		e := start(t, setup{policies: policy("ips", spec(`"127.0.0.0/8"`))})
		// The test connects from 127.0.0.1, a trusted proxy: each forwarded
		// client has a budget of its own.
		g.Expect(get(t, e.url, "X-Forwarded-For: 198.51.100.7").status).To(Equal(200))
		g.Expect(get(t, e.url, "X-Forwarded-For: 198.51.100.8").status).To(Equal(200))
		g.Expect(get(t, e.url, "X-Forwarded-For: 198.51.100.7").status).To(Equal(429))
		// A client's own spoofed entry before the proxy's does not help: the
		// rightmost untrusted address is the client.
		g.Expect(get(t, e.url, "X-Forwarded-For: 203.0.113.1, 198.51.100.7").status).To(Equal(429))
	})
	t.Run("untrusted peer", func(t *testing.T) {
		g := NewWithT(t)
		e := start(t, setup{policies: policy("ips", spec(`"10.0.0.0/8"`))})
		g.Expect(get(t, e.url, "X-Forwarded-For: 198.51.100.7").status).To(Equal(200))
		r := get(t, e.url, "X-Forwarded-For: 198.51.100.8")
		g.Expect(r.status).To(Equal(429), "a spoofed X-Forwarded-For from an untrusted peer is ignored: both are 127.0.0.1")
	})
}

// jwt is an unsigned token with these claims, which only a policy with
// verify: false reads (jwt_test.go has signed ones).
func jwt(claims string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(claims)) + ".c2lnbmF0dXJl"
}

func TestJWTClaimIdentity(t *testing.T) {
	g := NewWithT(t)
	e := start(t, setup{policies: policy("tokens", `  identity: {sources: [{jwtClaim: {claim: tenant_id, verify: false}}]}
  rules:
    - name: api
      algorithm: TokenBucket
      limits: [{requests: 2, period: 1h}]`)})
	acme := "Authorization: Bearer " + jwt(`{"sub":"u1","tenant_id":"acme"}`)
	acmeOtherUser := "Authorization: Bearer " + jwt(`{"sub":"u2","tenant_id":"acme"}`)
	globex := "Authorization: Bearer " + jwt(`{"sub":"u3","tenant_id":"globex"}`)
	g.Expect(get(t, e.url, acme).header.Get("X-RateLimit-Remaining")).To(Equal("1"))
	g.Expect(get(t, e.url, acmeOtherUser).header.Get("X-RateLimit-Remaining")).To(Equal("0"), "same tenant claim, same budget")
	g.Expect(get(t, e.url, acme).status).To(Equal(429))
	g.Expect(get(t, e.url, globex).header.Get("X-RateLimit-Remaining")).To(Equal("1"))
	// No token: the anonymous bucket, not unlimited.
	g.Expect(get(t, e.url).status).To(Equal(200))
	g.Expect(get(t, e.url, "Authorization: Bearer not-a-jwt").header.Get("X-RateLimit-Remaining")).To(Equal("0"))
}

// TestAPIKeysAreNeverKept: the raw key never reaches Redis keys, logs,
// metrics or /status, and overrides name a key by its hash. Its unsalted
// hash, the form overrides and /debug/tenant use, is only in the
// authenticated /status's top tenants.
func TestAPIKeysAreNeverKept(t *testing.T) {
	g := NewWithT(t)
	const key, otherKey = "sk_live_TOPSECRET_4242", "sk_live_OTHERSECRET_77"
	sum := sha256.Sum256([]byte(key))
	hashed := "sha256:" + hex.EncodeToString(sum[:])
	e := start(t, setup{policies: policy("keys", `  identity: {sources: [{apiKey: {}}]}
  rules:
    - name: api
      algorithm: SlidingWindowCounter
      limits: [{requests: 1, period: 1h}]
  overrides:
    - {tenant: "`+hashed+`", rule: api, limits: [{requests: 3, period: 1h}]}`), args: []string{"--log-level", "debug"}})
	for range 3 {
		r := get(t, e.url, "X-API-Key: "+key)
		g.Expect(r.status).To(Equal(200))
		g.Expect(r.header.Get("X-RateLimit-Limit")).To(Equal("3"), "the override names the key's hash")
	}
	g.Expect(get(t, e.url, "X-API-Key: "+key).status).To(Equal(429))
	g.Expect(get(t, e.url, "X-API-Key: "+otherKey).header.Get("X-RateLimit-Limit")).To(Equal("1"))
	g.Expect(get(t, e.url+"/debug/tenant").status).To(Equal(200), "the proxy forwards /debug paths to the application")

	keys, err := shared.Client().Keys(context.Background(), "sl:{"+namespace(t)+"/*").Result()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys).To(HaveLen(3), "one bucket per key, and the anonymous one")
	status := get(t, e.admin+"/status").body
	seen := strings.Join(keys, "\n") + get(t, e.admin+"/metrics").body + e.logs.String()
	for _, secret := range []string{key, otherKey, "TOPSECRET", "OTHERSECRET", hex.EncodeToString(sum[:])} {
		g.Expect(seen).NotTo(ContainSubstring(secret), fmt.Sprintf("%q leaked", secret))
	}
	for _, secret := range []string{key, otherKey, "TOPSECRET", "OTHERSECRET"} {
		g.Expect(status).NotTo(ContainSubstring(secret), fmt.Sprintf("%q leaked into /status", secret))
	}
	g.Expect(status).To(ContainSubstring(`"tenant": "`+hashed+`"`), "the top tenants name the key by its hash")
}
