package request

import (
	"bufio"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// parse reads raw as net/http's server does, from peer.
func parse(t *testing.T, raw, peer string) *http.Request {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatalf("net/http refuses %q: %v", raw, err)
	}
	r.RemoteAddr = peer
	return r
}

var shop = NewCanonicalizer([]string{"x-tenant-id", "X-Api-Key", "Authorization", "X-Plan"},
	[]netip.Prefix{netip.MustParsePrefix("10.42.0.0/24")})

func TestCanonicalTarget(t *testing.T) {
	cases := map[string]struct {
		target    string
		path, uri string // "" path: refused
		refusal   string
	}{
		"plain":                      {target: "/v1/exports?x=1", path: "/v1/exports", uri: "/v1/exports?x=1"},
		"query kept as sent":         {target: "/v1/exports?a=%2F..%2F&b", path: "/v1/exports", uri: "/v1/exports?a=%2F..%2F&b"},
		"dot segments cleaned":       {target: "/v1/x/../exports", path: "/v1/exports", uri: "/v1/exports"},
		"double slash":               {target: "//v1//exports/", path: "/v1/exports/", uri: "/v1/exports/"},
		"encoded letter":             {target: "/v1/%65xports", path: "/v1/exports", uri: "/v1/exports"},
		"encoded dots":               {target: "/healthz/%2e%2E/v1/exports", path: "/v1/exports", uri: "/v1/exports"},
		"encoded space kept encoded": {target: "/a%20b", path: "/a b", uri: "/a%20b"},
		"absolute-form":              {target: "http://API.example.com/v1/../v1/exports?x", path: "/v1/exports", uri: "/v1/exports?x"},
		"absolute-form, no path":     {target: "http://api.example.com", path: "/", uri: "/"},
		"absolute-form, query only":  {target: "http://api.example.com?x=1", path: "/", uri: "/?x=1"},
		"fragment":                   {target: "/v1/exports#frag", refusal: "fragment"},
		"fragment hiding dots":       {target: "/v1/exports#/../../healthz", refusal: "fragment"},
		"asterisk":                   {target: "*", refusal: `"*"`},
		"encoded slash":              {target: "/v1%2Fexports", refusal: "encoded slash"},
		"encoded slash, lower case":  {target: "/v1%2fexports", refusal: "encoded slash"},
		"backslash":                  {target: `/v1\exports`, refusal: "backslash"},
		"encoded backslash":          {target: "/v1%5cexports", refusal: "backslash"},
		"path parameter":             {target: "/v1/exports;jsessionid=1", refusal: `";"`},
		"encoded path parameter":     {target: "/v1/exports%3Bx", refusal: `";"`},
		"encoded NUL":                {target: "/healthz%00/../v1/exports", refusal: "control character"},
		"encoded newline":            {target: "/v1/exports%0d%0aX-Tenant-ID:%20x", refusal: "control character"},
		"other scheme":               {target: "ftp://example.com/v1/exports", refusal: "absolute http"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := parse(t, "GET "+c.target+" HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "192.0.2.1:5000")
			req, err := shop.Canonicalize(r)
			if c.refusal != "" {
				var re *Error
				g.Expect(errors.As(err, &re)).To(BeTrue(), "refused")
				g.Expect(re.Reason).To(Equal(ReasonTarget))
				g.Expect(re.Detail).To(ContainSubstring(c.refusal))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(req.Path).To(Equal(c.path))
			g.Expect(r.RequestURI).To(Equal(c.uri), "what the application receives")
			g.Expect(r.URL.Path).To(Equal(c.path))
			g.Expect(r.URL.EscapedPath()+query(r)).To(Equal(c.uri), "the URL the reverse proxy sends")
		})
	}
}

func query(r *http.Request) string {
	if r.URL.RawQuery == "" {
		return ""
	}
	return "?" + r.URL.RawQuery
}

func TestMethods(t *testing.T) {
	for method, refused := range map[string]bool{
		"GET": false, "HEAD": false, "PATCH": false, "PROPFIND": false, "purge": false,
		"get": true, "Get": true, "hEAD": true, "post": true, "CONNECT": true,
	} {
		t.Run(method, func(t *testing.T) {
			g := NewWithT(t)
			r := parse(t, method+" /v1/exports HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "192.0.2.1:5000")
			if method == "CONNECT" {
				r = parse(t, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n", "192.0.2.1:5000")
			}
			_, err := shop.Canonicalize(r)
			if refused {
				g.Expect(err).To(MatchError(ContainSubstring("")))
				g.Expect(reasonOf(err)).To(Equal(ReasonMethod))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
		})
	}
}

func TestMethodOverrides(t *testing.T) {
	cases := map[string]struct {
		raw  string
		want []string
		any  bool
	}{
		"header": {raw: "POST /x HTTP/1.1\r\nHost: a\r\nX-HTTP-Method-Override: delete\r\nContent-Length: 0\r\n\r\n", want: []string{"DELETE"}},
		"every header and the query, whichever a framework prefers": {
			raw:  "POST /x?_method=DELETE HTTP/1.1\r\nHost: a\r\nX-HTTP-Method: PUT\r\nX-Method-Override: PATCH\r\nContent-Length: 0\r\n\r\n",
			want: []string{"PUT", "PATCH", "DELETE"}},
		"encoded field name":        {raw: "POST /x?%5Fmethod=DELETE HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", want: []string{"DELETE"}},
		"PHP's dot":                 {raw: "POST /x?.method=DELETE HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", want: []string{"DELETE"}},
		"PHP drops a leading space": {raw: "POST /x?+_method=DELETE HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", want: []string{"DELETE"}},
		"other field":               {raw: "POST /x?methods=DELETE HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"},
		"unread form":               {raw: "POST /x HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", any: true},
		"multipart form":            {raw: "POST /x HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 0\r\n\r\n", any: true},
		"not a POST":                {raw: "GET /x?_method=DELETE HTTP/1.1\r\nHost: a\r\nX-HTTP-Method-Override: DELETE\r\n\r\n"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			req, err := shop.Canonicalize(parse(t, c.raw, "192.0.2.1:5000"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(req.MethodOverrides).To(Equal(c.want))
			g.Expect(req.AnyMethod).To(Equal(c.any))
		})
	}
}

func TestContentTypeTwiceRefused(t *testing.T) {
	g := NewWithT(t)
	_, err := shop.Canonicalize(parse(t, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n", "192.0.2.1:5000"))
	g.Expect(err).To(MatchError(ContainSubstring("Content-Type")))
}

func TestHost(t *testing.T) {
	cases := map[string]struct{ host, match, forwarded string }{
		"lower case":         {"API.Example.COM", "api.example.com", "api.example.com"},
		"trailing dot":       {"api.example.com.", "api.example.com", "api.example.com"},
		"port kept":          {"api.example.com.:8080", "api.example.com", "api.example.com:8080"},
		"IPv4":               {"10.0.0.1:80", "10.0.0.1", "10.0.0.1:80"},
		"IPv6":               {"[2001:DB8::1]:443", "2001:db8::1", "[2001:db8::1]:443"},
		"two trailing dots":  {"api.example.com..", "", ""},
		"encoded dot":        {"api.example.com%2e", "", ""},
		"userinfo":           {"user@api.example.com", "", ""},
		"bad port":           {"api.example.com:x", "", ""},
		"empty label":        {"api..example.com", "", ""},
		"IPv6 with zone":     {"[fe80::1%25eth0]", "", ""},
		"not an IPv6orthing": {"[api.example.com]", "", ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := parse(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "192.0.2.1:5000")
			r.Host = c.host // some of these net/http would refuse itself
			req, err := shop.Canonicalize(r)
			if c.match == "" {
				g.Expect(err).To(HaveOccurred())
				g.Expect(reasonOf(err)).To(Equal(ReasonHost))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(req.Host).To(Equal(c.match))
			g.Expect(r.Host).To(Equal(c.forwarded))
		})
	}
}

func TestHopByHopRemovedBeforeAnythingReadsTheRequest(t *testing.T) {
	g := NewWithT(t)
	r := parse(t, "GET /v1/exports HTTP/1.1\r\nHost: a\r\nX-Tenant-ID: fresh\r\nX-Plan: premium\r\n"+
		"Connection: keep-alive, x-tenant-id\r\nConnection: X-PLAN\r\nKeep-Alive: 5\r\nTE: trailers, deflate\r\n"+
		"Proxy-Authorization: x\r\nUpgrade: h2c\r\nHTTP2-Settings: AAA\r\nExpect: 100-continue\r\n\r\n", "192.0.2.1:5000")
	req, err := shop.Canonicalize(r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(req.HeaderValue("X-Tenant-Id")).To(BeEmpty(), "named in Connection: gone for the limiter")
	for _, k := range []string{"X-Tenant-Id", "X-Plan", "Connection", "Keep-Alive", "Proxy-Authorization", "Upgrade", "Expect"} {
		g.Expect(r.Header).NotTo(HaveKey(k), "gone for the application")
	}
	g.Expect(r.Header["Http2-Settings"]).To(BeNil(), "h2c is not an upgrade passed on")
	g.Expect(r.Header["Te"]).To(Equal([]string{"trailers"}))
}

func TestConnectionOptionsInAnyCaseRemoveTheirHeaders(t *testing.T) {
	g := NewWithT(t)
	r := parse(t, "GET / HTTP/1.1\r\nHost: a\r\nConnection: CLOSE, Keep-alive\r\nClose: x\r\nKeep-Alive: 5\r\nX-Kept: 1\r\n\r\n", "192.0.2.1:5000")
	_, err := shop.Canonicalize(r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Header).NotTo(HaveKey("Close"), "named in Connection: hop-by-hop")
	g.Expect(r.Header).NotTo(HaveKey("Keep-Alive"))
	g.Expect(r.Header["X-Kept"]).To(Equal([]string{"1"}))
}

// The peer the application reads in X-Forwarded-For is in canonical form,
// and a trusted proxy is recognised in every spelling of its address.
func TestPeerInCanonicalForm(t *testing.T) {
	for remote, xff := range map[string]string{
		"192.0.2.1:5000":          "192.0.2.1",
		"[::ffff:192.0.2.1]:5000": "192.0.2.1",
		"[::ffff:10.42.0.9]:5000": "198.51.100.7, 10.42.0.9",
		"10.42.0.9:5000":          "198.51.100.7, 10.42.0.9",
		"[2001:DB8:0::1]:5000":    "2001:db8::1",
		"[fe80::1%eth0]:5000":     "fe80::1",
		"[::1]:5000":              "::1",
		"not-an-address:5000":     "",
		"192.0.2.1":               "",
	} {
		t.Run(remote, func(t *testing.T) {
			g := NewWithT(t)
			r := parse(t, "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 198.51.100.7\r\n\r\n", remote)
			_, err := shop.Canonicalize(r)
			g.Expect(err).NotTo(HaveOccurred())
			if xff == "" {
				g.Expect(r.Header).NotTo(HaveKey("X-Forwarded-For"), "no address: nothing the client wrote either")
				return
			}
			g.Expect(r.Header["X-Forwarded-For"]).To(Equal([]string{xff}))
		})
	}
}

func TestWebSocketUpgradeKept(t *testing.T) {
	g := NewWithT(t)
	r := parse(t, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: WebSocket\r\nSec-WebSocket-Key: k\r\n\r\n", "192.0.2.1:5000")
	_, err := shop.Canonicalize(r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Header["Connection"]).To(Equal([]string{"Upgrade"}))
	g.Expect(r.Header["Upgrade"]).To(Equal([]string{"websocket"}))
	g.Expect(r.Header["Sec-Websocket-Key"]).To(Equal([]string{"k"}))
}

func TestAmbiguousIdentityHeadersRefused(t *testing.T) {
	cases := map[string]struct {
		headers string
		refused bool
	}{
		"one value":                  {"X-Tenant-ID: acme\r\n", false},
		"same value twice":           {"X-Tenant-ID: acme\r\nx-tenant-id:  acme \r\n", false},
		"two values":                 {"X-Tenant-ID: fresh\r\nX-Tenant-ID: over-limit\r\n", true},
		"empty then a value":         {"X-Tenant-ID:\r\nX-Tenant-ID: acme\r\n", true},
		"two API keys":               {"X-API-Key: a\r\nX-Api-Key: b\r\n", true},
		"two Authorization":          {"Authorization: Bearer a\r\nAuthorization: Bearer b\r\n", true},
		"two tiers":                  {"X-Plan: free\r\nX-Plan: premium\r\n", true},
		"underscore lookalike":       {"X-Tenant-ID: a\r\nX_Tenant_ID: b\r\n", true},
		"underscore lookalike alone": {"x_api_key: b\r\n", true},
		"other header twice":         {"Accept: a\r\nAccept: b\r\n", false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := parse(t, "GET / HTTP/1.1\r\nHost: a\r\n"+c.headers+"\r\n", "192.0.2.1:5000")
			_, err := shop.Canonicalize(r)
			if c.refused {
				g.Expect(err).To(HaveOccurred())
				g.Expect(reasonOf(err)).To(Equal(ReasonIdentity))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
		})
	}
}

func TestForwardingHeaders(t *testing.T) {
	const forged = "X-Forwarded-For: 198.51.100.7\r\nX-Forwarded-Host: admin.example.com\r\nX-Forwarded-Proto: https\r\n" +
		"X-Forwarded-Port: 443\r\nX-Forwarded-Prefix: /admin\r\nX-Real-IP: 198.51.100.7\r\nForwarded: for=198.51.100.7\r\n" +
		"X_Forwarded_Host: evil\r\nX-Original-URL: /v1/exports\r\nX-Rewrite-URL: /v1/exports\r\n"

	t.Run("untrusted peer", func(t *testing.T) {
		g := NewWithT(t)
		r := parse(t, "GET /healthz HTTP/1.1\r\nHost: API.example.com\r\n"+forged+"\r\n", "192.0.2.1:5000")
		_, err := shop.Canonicalize(r)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Header).To(Equal(http.Header{
			"X-Forwarded-For":   {"192.0.2.1"},
			"X-Forwarded-Host":  {"api.example.com"},
			"X-Forwarded-Proto": {"http"},
		}), "what the enforcer saw, nothing the client wrote")
		// The two values share one backing array: growing one never
		// writes over the other.
		_ = append(r.Header["X-Forwarded-For"], "203.0.113.9")
		g.Expect(r.Header["X-Forwarded-Host"]).To(Equal([]string{"api.example.com"}))
	})
	t.Run("trusted proxy sending the field twice", func(t *testing.T) {
		g := NewWithT(t)
		r := parse(t, "GET /healthz HTTP/1.1\r\nHost: api.example.com\r\nX-Forwarded-For: 198.51.100.7\r\n"+
			"x-forwarded-for: 198.51.100.8, 198.51.100.9\r\n\r\n", "10.42.0.9:5000")
		_, err := shop.Canonicalize(r)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Header["X-Forwarded-For"]).To(Equal([]string{"198.51.100.7, 198.51.100.8, 198.51.100.9, 10.42.0.9"}),
			"one field, every hop in order, the peer last")
		g.Expect(r.Header["X-Forwarded-Host"]).To(Equal([]string{"api.example.com"}))
	})
	t.Run("trusted proxy", func(t *testing.T) {
		g := NewWithT(t)
		r := parse(t, "GET /healthz HTTP/1.1\r\nHost: api.example.com\r\n"+forged+"\r\n", "10.42.0.9:5000")
		_, err := shop.Canonicalize(r)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Header["X-Forwarded-For"]).To(Equal([]string{"198.51.100.7, 10.42.0.9"}))
		g.Expect(r.Header["X-Forwarded-Host"]).To(Equal([]string{"admin.example.com"}))
		g.Expect(r.Header["X-Forwarded-Proto"]).To(Equal([]string{"https"}))
		g.Expect(r.Header["Forwarded"]).To(Equal([]string{"for=198.51.100.7"}))
		g.Expect(r.Header["X_forwarded_host"]).To(Equal([]string{"evil"}), "a trusted proxy's own business")
		g.Expect(r.Header).NotTo(HaveKey("X-Original-Url"), "never: it changes the route")
		g.Expect(r.Header).NotTo(HaveKey("X-Rewrite-Url"))
	})
}

func TestCleanPath(t *testing.T) {
	g := NewWithT(t)
	for p, want := range map[string]string{
		"": "/", "/": "/", "/v1/": "/v1/", "/v1//x": "/v1/x", "/v1/../healthz": "/healthz", "/a/./b/": "/a/b/",
		"/../..": "/", "v1": "/v1", "/v1/x/..": "/v1", "/v1/x/../": "/v1/",
	} {
		g.Expect(CleanPath(p)).To(Equal(want), p)
	}
}

func TestFoldedPath(t *testing.T) {
	g := NewWithT(t)
	req, err := shop.Canonicalize(parse(t, "GET /V1/%45xports HTTP/1.1\r\nHost: a\r\n\r\n", "192.0.2.1:5000"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(req.Path).To(Equal("/V1/Exports"))
	g.Expect(req.FoldedPath).To(Equal("/v1/exports"))
}

func TestPartitionPath(t *testing.T) {
	g := NewWithT(t)
	for path, want := range map[string]string{
		"/v1/items/Abc.json": "/v1/items/abc", "/v1/items/abc": "/v1/items/abc", "/v1/items/a.b.c": "/v1/items/a",
		"/v1.2/items": "/v1.2/items", "/.well-known": "/.well-known", "/": "/",
	} {
		r := Known("GET", "a", path, nil)
		g.Expect(r.PartitionPath()).To(Equal(want), path)
	}
}

func TestIdentityValuesAreVisibleASCII(t *testing.T) {
	g := NewWithT(t)
	_, err := shop.Canonicalize(parse(t, "GET / HTTP/1.1\r\nHost: a\r\nX-Tenant-ID: acme\xa0\r\n\r\n", "192.0.2.1:5000"))
	g.Expect(err).To(HaveOccurred(), "a WSGI app's strip() would see acme")
	_, err = shop.Canonicalize(parse(t, "GET / HTTP/1.1\r\nHost: a\r\nX-Tenant-ID: acme corp\r\nAccept: caf\xc3\xa9\r\n\r\n", "192.0.2.1:5000"))
	g.Expect(err).NotTo(HaveOccurred(), "inner spaces, and other headers, are the application's business")
}

func TestDoubleEncodingRefused(t *testing.T) {
	g := NewWithT(t)
	_, err := shop.Canonicalize(parse(t, "GET /v1/%2565xports HTTP/1.1\r\nHost: a\r\n\r\n", "192.0.2.1:5000"))
	g.Expect(err).To(MatchError(ContainSubstring("encoded twice")))
	req, err := shop.Canonicalize(parse(t, "GET /100%25 HTTP/1.1\r\nHost: a\r\n\r\n", "192.0.2.1:5000"))
	g.Expect(err).NotTo(HaveOccurred(), "a literal percent sign is fine")
	g.Expect(req.Path).To(Equal("/100%"))
}

// BenchmarkCanonicalize measures the canonical request of an ordinary API
// call, as the proxy makes it before every decision.
func BenchmarkCanonicalize(b *testing.B) {
	raw := "GET /v1/orders/7?page=2 HTTP/1.1\r\nHost: api.example.com\r\nX-Tenant-ID: acme\r\nX-Plan: premium\r\n" +
		"Accept: application/json\r\nUser-Agent: bench\r\nConnection: keep-alive\r\n\r\n"
	base, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r := *base
		r.Header = base.Header.Clone()
		u := *base.URL
		r.URL = &u
		r.RemoteAddr = "192.0.2.1:5000"
		if _, err := shop.Canonicalize(&r); err != nil {
			b.Fatal(err)
		}
	}
}

// reasonOf is the Reason of a refusal, "" for any other error.
func reasonOf(err error) string {
	var re *Error
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}
