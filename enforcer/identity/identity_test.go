package identity

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/request"
)

// newRequest builds a canonical request to target (a path) from remote
// with headers given as "Name: value" lines (a name may repeat), as the
// proxy hands it to identity: headers as they are.
func newRequest(method, target, remote string, headers ...string) *request.Request {
	h := http.Header{}
	for _, line := range headers {
		name, value, _ := strings.Cut(line, ":")
		h.Add(name, strings.TrimPrefix(value, " "))
	}
	u := httptest.NewRequest(method, target, nil)
	host := u.Host
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	r := request.Known(method, strings.TrimSuffix(host, "."), u.URL.Path, h)
	r.RemoteAddr = remote
	return &r
}

// token is an unsigned JWS whose payload is the given JSON.
func token(payload string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload)) + ".c2lnbmF0dXJl"
}

func header(name string) config.Source {
	return config.Source{Header: &config.HeaderSource{Name: name}}
}
func apiKey(name string) config.Source {
	return config.Source{APIKey: &config.HeaderSource{Name: name}}
}
func jwtClaim(claim, header string) config.Source {
	return config.Source{JWTClaim: &config.JWTClaimSource{Claim: claim, Header: header}}
}
func clientIP(trusted ...string) config.Source {
	return config.Source{ClientIP: &config.ClientIPSource{TrustedProxies: trusted}}
}
func shared() config.Source { return config.Source{Shared: &struct{}{}} }

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestFirstSourceWithAValueNamesTheTenant(t *testing.T) {
	sources := []config.Source{header("x-tenant-id"), apiKey("X-API-Key"), jwtClaim("tenant_id", "Authorization"), clientIP()}
	cases := map[string]struct {
		req    *request.Request
		tenant string
	}{
		"header, trimmed": {req: newRequest("GET", "/", "192.0.2.7:4000", "X-Tenant-ID:  acme  ", "X-API-Key: sk_live_1"),
			tenant: "acme"},
		"blank header falls through to the API key, hashed": {req: newRequest("GET", "/", "192.0.2.7:4000", "X-Tenant-ID:   ", "X-API-Key: sk_live_1"),
			tenant: "sha256:" + sha256Hex("sk_live_1")},
		"JWT claim": {req: newRequest("GET", "/", "192.0.2.7:4000", "Authorization: Bearer "+token(`{"tenant_id":"globex"}`)),
			tenant: "globex"},
		"client IP last": {req: newRequest("GET", "/", "192.0.2.7:4000", "Authorization: Basic dXNlcjpwYXNz"),
			tenant: "192.0.2.7"},
	}
	res, err := New(config.Identity{Sources: sources})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			id := res.Resolve(c.req)
			g.Expect(id.Tenant).To(Equal(c.tenant))
			g.Expect(id.Key).To(Equal(c.tenant))
			g.Expect(id.Name()).To(Equal(c.tenant))
		})
	}
}

func TestAPIKeyIsNeverKeptRaw(t *testing.T) {
	g := NewWithT(t)
	res, err := New(config.Identity{Sources: []config.Source{apiKey("X-API-Key")}, PartitionBy: []config.PartitionKey{config.PartitionByPath}})
	g.Expect(err).NotTo(HaveOccurred())
	id := res.Resolve(newRequest("GET", "/v1/orders", "192.0.2.7:4000", "X-API-Key: sk_live_0123456789abcdef"))
	g.Expect(id.Tenant).To(Equal("sha256:" + sha256Hex("sk_live_0123456789abcdef")))
	g.Expect(id.Key).NotTo(ContainSubstring("sk_live"))
	g.Expect(id.Tenant).NotTo(ContainSubstring("sk_live"))
}

func TestRequestsNoSourceNamesShareTheAnonymousTenant(t *testing.T) {
	g := NewWithT(t)
	res, err := New(config.Identity{Sources: []config.Source{header("X-Tenant-ID"), jwtClaim("sub", "Authorization")}})
	g.Expect(err).NotTo(HaveOccurred())

	id := res.Resolve(newRequest("GET", "/", "192.0.2.7:4000", "Authorization: Bearer not-a-token"))
	g.Expect(id.Tenant).To(Equal(Anonymous))
	g.Expect(id.Key).To(Equal(Anonymous))
	g.Expect(id.Name()).To(Equal("anonymous"), "overrides name it anonymous")

	claimed := res.Resolve(newRequest("GET", "/", "192.0.2.7:4000", "X-Tenant-ID: anonymous"))
	g.Expect(claimed.Key).NotTo(Equal(id.Key), "a client calling itself anonymous has a bucket of its own")
	g.Expect(claimed.Name()).To(Equal("anonymous"))
}

func TestSharedPutsEveryRequestInOneTenant(t *testing.T) {
	g := NewWithT(t)
	res, err := New(config.Identity{Sources: []config.Source{header("X-Tenant-ID"), shared()}})
	g.Expect(err).NotTo(HaveOccurred())
	a := res.Resolve(newRequest("GET", "/", "192.0.2.7:4000"))
	b := res.Resolve(newRequest("POST", "/x", "198.51.100.1:4000"))
	g.Expect(a).To(Equal(b))
	g.Expect(a.Tenant).To(Equal(Shared))
	g.Expect(a.Name()).To(Equal("shared"))
}

func TestPartitionByAppendsTheEndpointToTheTenant(t *testing.T) {
	cases := map[string]struct {
		partitionBy []config.PartitionKey
		req         *request.Request
		key         string
	}{
		"method": {[]config.PartitionKey{"Method"}, newRequest("POST", "/v1/x", "192.0.2.7:1"), "acme\x00POST"},
		"cleaned path, no query": {[]config.PartitionKey{"Path"}, newRequest("GET", "http://shop.example.com//v1/./a/../orders?page=2", "192.0.2.7:1"),
			"acme\x00/v1/orders"},
		"host without port, lower case": {[]config.PartitionKey{"Host"}, newRequest("GET", "http://Shop.Example.COM:8443/", "192.0.2.7:1"),
			"acme\x00shop.example.com"},
		"all, in configured order": {[]config.PartitionKey{"Host", "Method", "Path"}, newRequest("DELETE", "http://api.example.com/v1/orders/7", "192.0.2.7:1"),
			"acme\x00api.example.com\x00DELETE\x00/v1/orders/7"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			res, err := New(config.Identity{Sources: []config.Source{header("X-Tenant-ID")}, PartitionBy: c.partitionBy})
			g.Expect(err).NotTo(HaveOccurred())
			c.req.Header.Set("X-Tenant-ID", "acme")
			id := res.Resolve(c.req)
			g.Expect(id.Tenant).To(Equal("acme"), "overrides match the tenant, not the partition")
			g.Expect(id.Key).To(Equal(c.key))
		})
	}
}

func TestAnonymousRequestsArePartitionedToo(t *testing.T) {
	g := NewWithT(t)
	res, err := New(config.Identity{Sources: []config.Source{header("X-Tenant-ID")}, PartitionBy: []config.PartitionKey{"Method"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Resolve(newRequest("GET", "/", "192.0.2.7:1")).Key).To(Equal(Anonymous + "\x00GET"))
}

func TestNewRefusesWhatItCannotResolve(t *testing.T) {
	cases := map[string]struct {
		cfg  config.Identity
		want string
	}{
		"no source":         {config.Identity{}, "at least one source"},
		"empty source":      {config.Identity{Sources: []config.Source{{}}}, "exactly one of"},
		"header no name":    {config.Identity{Sources: []config.Source{header("")}}, "exactly one of"},
		"jwt without claim": {config.Identity{Sources: []config.Source{jwtClaim("", "Authorization")}}, "exactly one of"},
		"bad CIDR":          {config.Identity{Sources: []config.Source{clientIP("10.0.0.0/33")}}, `"10.0.0.0/33" is not a CIDR`},
		"bad partition":     {config.Identity{Sources: []config.Source{shared()}, PartitionBy: []config.PartitionKey{"Query"}}, `partitionBy "Query"`},
		"partition twice":   {config.Identity{Sources: []config.Source{shared()}, PartitionBy: []config.PartitionKey{"Path", "Method", "Path"}}, "partitionBy names Path twice"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := New(c.cfg)
			g.Expect(err).To(MatchError(ContainSubstring(c.want)))
		})
	}
}

func TestTier(t *testing.T) {
	known := []string{"free", "basic", "premium"}
	cases := map[string]struct {
		source config.Source
		req    *request.Request
		tier   string
	}{
		"header":                   {header("X-Plan"), newRequest("GET", "/", "192.0.2.7:1", "X-Plan: premium"), "premium"},
		"header trimmed":           {header("X-Plan"), newRequest("GET", "/", "192.0.2.7:1", "X-Plan:  basic "), "basic"},
		"missing is the default":   {header("X-Plan"), newRequest("GET", "/", "192.0.2.7:1"), "free"},
		"unknown is the default":   {header("X-Plan"), newRequest("GET", "/", "192.0.2.7:1", "X-Plan: platinum"), "free"},
		"tiers are case-sensitive": {header("X-Plan"), newRequest("GET", "/", "192.0.2.7:1", "X-Plan: Premium"), "free"},
		"JWT claim": {jwtClaim("plan", "Authorization"),
			newRequest("GET", "/", "192.0.2.7:1", "Authorization: Bearer "+token(`{"plan":"basic"}`)), "basic"},
		"JWT without the claim": {jwtClaim("plan", "Authorization"),
			newRequest("GET", "/", "192.0.2.7:1", "Authorization: Bearer "+token(`{"sub":"x"}`)), "free"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			tr, err := NewTiers(&config.Tiers{Source: c.source, Default: "free"}, known)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tr.Tier(c.req)).To(Equal(c.tier))
			g.Expect(tr.Named("platinum")).To(Equal("free"))
			g.Expect(tr.Named("basic")).To(Equal("basic"))
		})
	}

	g := NewWithT(t)
	none, err := NewTiers(nil, known)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none.Tier(newRequest("GET", "/", "192.0.2.7:1", "X-Plan: premium"))).To(BeEmpty(), "no tiers")

	_, err = NewTiers(&config.Tiers{Source: config.Source{ClientIP: &config.ClientIPSource{}}, Default: "free"}, known)
	g.Expect(err).To(MatchError(ContainSubstring("header or jwtClaim")))
	_, err = NewTiers(&config.Tiers{Source: header("X-Plan")}, known)
	g.Expect(err).To(MatchError(ContainSubstring("default")))
}

func BenchmarkResolve(b *testing.B) {
	cases := map[string]struct {
		cfg config.Identity
		req *request.Request
	}{
		"header":   {config.Identity{Sources: []config.Source{header("X-Tenant-ID")}}, newRequest("GET", "/", "192.0.2.7:1", "X-Tenant-ID: acme")},
		"apiKey":   {config.Identity{Sources: []config.Source{apiKey("X-API-Key")}}, newRequest("GET", "/", "192.0.2.7:1", "X-API-Key: sk_live_0123456789abcdef")},
		"clientIP": {config.Identity{Sources: []config.Source{clientIP("10.0.0.0/8")}}, newRequest("GET", "/", "10.1.2.3:1", "X-Forwarded-For: 203.0.113.9, 10.0.0.2")},
		"jwtClaim": {config.Identity{Sources: []config.Source{jwtClaim("tenant_id", "Authorization")}},
			newRequest("GET", "/", "192.0.2.7:1", "Authorization: Bearer "+token(`{"iss":"https://auth.example.com/","sub":"user-42","aud":"shop","exp":1900000000,"iat":1800000000,"tenant_id":"acme","scope":"orders:read orders:write"}`))},
		"header+partition": {config.Identity{Sources: []config.Source{header("X-Tenant-ID")}, PartitionBy: []config.PartitionKey{"Method", "Path"}},
			newRequest("GET", "/v1/orders/7", "192.0.2.7:1", "X-Tenant-ID: acme")},
	}
	for name, c := range cases {
		b.Run(name, func(b *testing.B) {
			res, err := New(c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				res.Resolve(c.req)
			}
		})
	}
}

// TestIdentify: the identity of a tenant given by name is the one Resolve
// gives a request yielding that name, and with no name, the one of a
// request no source names: the shared bucket when a source is shared.
func TestIdentify(t *testing.T) {
	g := NewWithT(t)
	res, err := New(config.Identity{
		Sources:     []config.Source{header("X-Tenant"), shared()},
		PartitionBy: []config.PartitionKey{"Path", "Method"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	r := newRequest("POST", "/v1/orders", "192.0.2.7:1", "X-Tenant: acme")
	g.Expect(res.Identify("acme", "POST", "/v1/orders", "example.com")).To(Equal(res.Resolve(r)))
	anon := newRequest("POST", "/v1/orders", "192.0.2.7:1")
	g.Expect(res.Identify("", "POST", "/v1/orders", "example.com")).To(Equal(res.Resolve(anon)))
	g.Expect(res.Identify("", "POST", "/v1/orders", "").Tenant).To(Equal(Shared))
}
