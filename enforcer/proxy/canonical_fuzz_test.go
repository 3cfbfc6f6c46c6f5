package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/enforcer/request"
	"github.com/sluice-dev/sluice/enforcer/rules"
	"github.com/sluice-dev/sluice/enforcer/transport"
)

// decidedPolicies read identity from every kind of source, tiers from a
// header, and match by exact, prefix and glob paths, hosts and methods, so
// that any part of the request the application reads otherwise than the
// enforcer changes a rule, a tenant or a tier.
var decidedPolicies = []string{`{"name": "api", "uid": "uid-api", "generation": 1, "selector": {}, "replicas": 1,
  "upstreamPort": 8080, "mode": "Enforce", "failureMode": "Open", "timeout": "1s", "responseHeaders": "None",
  "salt": "salt-api", "trustedProxies": ["10.42.0.0/24"],
  "tiers": {"source": {"header": {"name": "X-Plan"}}, "default": "free"},
  "rules": [
    {"name": "health", "match": {"paths": [{"exact": "/healthz"}]}, "exempt": true, "identity": {"sources": [{"shared": {}}]}},
    {"name": "exports", "match": {"methods": ["GET"], "paths": [{"prefix": "/v1/exports"}]}, ` + decidedLimited(``) + `},
    {"name": "items", "match": {"paths": [{"glob": "/v1/items/*"}]}, ` + decidedLimited(`"Path", "Method"`) + `},
    {"name": "host", "match": {"hosts": ["api.example.com", "*.api.example.com"]}, ` + decidedLimited(`"Host"`) + `},
    {"name": "writes", "match": {"methods": ["POST"], "paths": [{"prefix": "/v1"}]}, ` + decidedLimited(``) + `},
    {"name": "deletes", "match": {"methods": ["DELETE"]}, ` + decidedLimited(`"Path"`) + `},
    {"name": "puts", "match": {"methods": ["PUT", "PATCH"], "paths": [{"exact": "/v1/items"}]}, ` + decidedLimited(``) + `},
    {"name": "all", "match": {}, ` + decidedLimited(``) + `,
     "tierLimits": {"free": [{"requests": 10, "period": "1m"}], "pro": [{"requests": 1000, "period": "1m"}]}}
  ]}`,
	`{"name": "edge", "uid": "uid-edge", "generation": 1, "selector": {}, "replicas": 1,
  "upstreamPort": 8080, "mode": "DryRun", "failureMode": "Open", "timeout": "1s", "responseHeaders": "None",
  "salt": "salt-edge", "rules": [
    {"name": "static", "match": {"paths": [{"prefix": "/static"}]}, "exempt": true, "identity": {"sources": [{"shared": {}}]}},
    {"name": "per-ip", "match": {"paths": [{"glob": "/**"}]}, "algorithm": "FixedWindow", "cost": 1,
     "identity": {"sources": [{"clientIP": {}}]}, "limits": [{"requests": 100, "period": "1m"}]}
  ]}`,
}

// decidedLimited is the rest of a limited rule of policy api: its tenant
// is the first of X-Tenant-ID, X-API-Key, the JWT's tenant_id and the
// client's address, partitioned as partitionBy says.
func decidedLimited(partitionBy string) string {
	return `"algorithm": "TokenBucket", "cost": 1, "limits": [{"requests": 100, "period": "1m"}],
     "identity": {"partitionBy": [` + partitionBy + `], "sources": [{"header": {"name": "X-Tenant-ID"}},
       {"apiKey": {"name": "X-API-Key"}}, {"jwtClaim": {"claim": "tenant_id", "header": "Authorization"}},
       {"clientIP": {"trustedProxies": ["10.42.0.0/24"]}}]}`
}

// decidedIdentityHeaders are the headers decidedPolicies read a tenant or
// a tier from.
var decidedIdentityHeaders = []string{"X-Tenant-Id", "X-Api-Key", "Authorization", "X-Plan"}

const (
	untrustedPeer = "192.0.2.1"
	trustedPeer   = "10.42.0.9" // in the policy's trustedProxies
	jwtAcme       = "eyJhbGciOiJub25lIn0.eyJ0ZW5hbnRfaWQiOiJhY21lIn0.sig"
	jwt42         = "eyJhbGciOiJub25lIn0.eyJ0ZW5hbnRfaWQiOjQyfQ.sig"
)

var decidedSeeds = []string{
	"GET /v1/items/abc HTTP/1.1\r\nHost: api.example.com\r\nX-Tenant-ID: acme\r\n\r\n",
	"GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /healthz/ HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /HEALTHZ HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /v1/../healthz HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /v1/items/./a/../b HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET //v1//exports/x HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /%76%31/%65xports HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /v1/items/%2e%2e/x HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /v1/items/a%2Fb HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /v1/items/a%252e HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /v1/items/a;b HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /v1/items/%C5%BFx HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /V1/EXPORTS HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /v1/exports.json HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /v1/items/abc.json HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /v1/items/ABC.JSON?x=1 HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET http://API.Example.com./v1/x HTTP/1.1\r\nHost: other\r\n\r\n",
	"GET http://api.example.com:8443?q=1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: API.EXAMPLE.COM.:80\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a.api.example.com\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: [2001:DB8::1]:8080\r\n\r\n",
	"GET / HTTP/1.0\r\n\r\n",
	"get /v1/exports HTTP/1.1\r\nHost: h\r\n\r\n",
	"HEAD /v1/exports HTTP/1.1\r\nHost: h\r\n\r\n",
	"PURGE /v1/items HTTP/1.1\r\nHost: h\r\n\r\n",
	"DELETE /v1/items/1 HTTP/1.1\r\nHost: h\r\n\r\n",
	"POST /v1/items HTTP/1.1\r\nHost: h\r\nX-HTTP-Method-Override: delete\r\nContent-Length: 0\r\n\r\n",
	"POST /v1/items HTTP/1.1\r\nHost: h\r\nX-HTTP-Method: PUT\r\nContent-Length: 0\r\n\r\n",
	"POST /x?_method=DELETE HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
	"POST /v1/items HTTP/1.1\r\nHost: h\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 14\r\n\r\n_method=delete",
	"POST /v1/x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
	"PUT /v1/items HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Tenant-ID: trailer\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nConnection: X-Tenant-ID\r\nX-Tenant-ID: acme\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-API-Key, X-Plan\r\nX-API-Key: k\r\nX-Plan: pro\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nConnection: X-Forwarded-For\r\nX-Forwarded-For: 10.42.0.7, 203.0.113.9\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nX-Tenant-ID: a\r\nX-Tenant-ID: b\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nX-Tenant-ID: a\r\nx-tenant-id: a \r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nX_Tenant_ID: a\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nX-Plan: pro\r\nX-Plan: free\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nX-Plan: PRO\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nX-Plan: pro\r\nX-API-Key: secret\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer\t" + jwtAcme + "\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nAuthorization: bearer " + jwt42 + "\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 203.0.113.9\r\nX-Real-IP: 203.0.113.9\r\nForwarded: for=203.0.113.9\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 203.0.113.9\r\nX-Forwarded-For: 10.42.0.3\r\nX-Forwarded-Host: evil\r\nX-Forwarded-Proto: https\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nX_Forwarded_For: 203.0.113.9\r\nX-Original-URL: /healthz\r\nX_Rewrite_URL: /healthz\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nTE: trailers, deflate\r\nKeep-Alive: 5\r\nProxy-Authorization: x\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAAA\r\n\r\n",
	"GET /v1/x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
	"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
	"GET /static/../v1/items/a HTTP/1.1\r\nHost: h\r\n\r\n",
}

// FuzzDecidedIsReceived holds the enforcer to its one promise: the rule,
// tenant and tier it decides on are those the application, parsing the
// bytes forwarded to it, would give the request. For each request the
// server accepts, it canonicalises and routes it as ServeHTTP does, writes
// it as the forwarder does, parses those bytes as a Go application would
// and routes what the application sees, without Canonicalize: both must
// come to the same checks. On the way it checks what the application
// receives: clean paths and hosts, no hop-by-hop field, forwarding headers
// as the trust rule says, one value per identity header.
//
// The seeds under testdata/fuzz/FuzzDecidedIsReceived are requests the
// enforcer lets a POST be routed as another method than it decided on
// (_method in a chunked form, Symfony's precedence, PHP's field names):
// they fail until the enforcer reads the method override as applications do.
func FuzzDecidedIsReceived(f *testing.F) {
	for _, seed := range decidedSeeds {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	table, err := rules.New(configOf(f, decidedPolicies...))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte, viaProxy bool) {
		peer := untrustedPeer
		if viaProxy {
			peer = trustedPeer
		}
		r, body, ok := serverRead(raw)
		if !ok {
			return
		}
		r.RemoteAddr = peer + ":5000"
		sent := r.Header.Clone()

		// The enforcer, in ServeHTTP's order.
		if transport.IsShortForm(r) {
			release, err := transport.BufferBody(r)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
		}
		req, err := table.Canonicalize(r)
		if err != nil {
			return // refused: nothing reaches the application
		}
		decided := table.Checks(&req, nil)
		release, err := transport.BufferBody(r)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		var wire bytes.Buffer
		taken, err := transport.WriteRequest(bufio.NewWriter(&wire), r, "127.0.0.1:1")
		if err != nil {
			t.Fatal(err)
		}
		if !taken {
			return // upgrades go through the reverse proxy
		}

		// The application.
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("%s\ninput:     %q\npeer:      %s\nforwarded: %q", fmt.Sprintf(format, args...), raw, peer, wire.String())
		}
		br := bufio.NewReader(bytes.NewReader(wire.Bytes()))
		ar, err := http.ReadRequest(br)
		if err != nil {
			fail("the application cannot parse the forwarded request: %v", err)
		}
		if reason := serverRefuses(ar); reason != "" {
			fail("a Go server would refuse the forwarded request: %s", reason)
		}
		appBody, err := io.ReadAll(ar.Body)
		if err != nil {
			fail("the application cannot read the forwarded body: %v", err)
		}
		if !bytes.Equal(appBody, body) {
			fail("the application got body %q, the client sent %q", appBody, body)
		}
		if rest, _ := io.ReadAll(br); len(rest) > 0 {
			fail("%d bytes after the forwarded request would be another request: %q", len(rest), rest)
		}
		if ar.Method != req.Method {
			fail("the application got method %q, the enforcer decided on %q", ar.Method, req.Method)
		}
		host := appHost(ar.Host)
		if ar.Host != strings.ToLower(ar.Host) || strings.HasSuffix(strings.TrimSuffix(ar.Host, ":"+port(ar.Host)), ".") {
			fail("the application got Host %q, not in canonical form", ar.Host)
		}
		if req.Host != "" && host != req.Host {
			fail("the application routes host %q, the enforcer decided on %q", host, req.Host)
		}
		if ar.URL.Path != request.CleanPath(ar.URL.Path) {
			fail("the application got path %q, which is not clean", ar.URL.Path)
		}
		if ar.URL.Path != req.Path {
			fail("the application got path %q, the enforcer decided on %q", ar.URL.Path, req.Path)
		}
		checkReceivedHeaders(fail, ar.Header, sent, peer, r.Host)

		// The application's client address: its peer is the enforcer,
		// a proxy it must trust, and the address the enforcer appended to
		// X-Forwarded-For is the one it saw, so the application walks
		// X-Forwarded-For from there. Taking that entry as the peer leaves
		// the enforcer's own walk (peer first, then the same entries from
		// the right) unchanged when the peer is untrusted (the header is
		// just the peer) and when it is trusted (the peer is visited
		// twice, which moves nothing), so any difference in clientIP
		// tenants comes from what was forwarded.
		xff := ar.Header["X-Forwarded-For"]
		if len(xff) != 1 {
			fail("the application got %d X-Forwarded-For fields, want 1", len(xff))
		}
		last := xff[0][strings.LastIndexByte(xff[0], ',')+1:]
		app := request.Known(ar.Method, host, ar.URL.Path, ar.Header)
		app.RemoteAddr = net.JoinHostPort(strings.TrimSpace(last), "1")

		// The method a POST is routed as: with the overrides the enforcer
		// found, everything else as received, the rules must be the same;
		// with the one Symfony and Laravel pick, none may be missing.
		app.MethodOverrides, app.AnyMethod = req.MethodOverrides, req.AnyMethod
		if got := table.Checks(&app, nil); !sameChecks(decided, got) {
			fail("the application would route the request otherwise\nenforcer:    %s\napplication: %s", describe(decided), describe(got))
		}
		app.MethodOverrides, app.AnyMethod = nil, false
		if m := symfonyOverride(ar, appBody); m != "" {
			app.MethodOverrides = []string{m}
		}
		if got := table.Checks(&app, nil); !containsChecks(decided, got) {
			fail("a Symfony application would route the request under rules the enforcer did not apply\nenforcer:    %s\napplication: %s",
				describe(decided), describe(got))
		}
	})
}

// serverRead parses raw as net/http's server reads a request off a
// connection, with its whole body; ok is false for one the server refuses
// or whose body is cut short.
func serverRead(raw []byte) (r *http.Request, body []byte, ok bool) {
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil || serverRefuses(r) != "" {
		return nil, nil, false
	}
	body, err = io.ReadAll(r.Body)
	if err != nil {
		return nil, nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return r, body, true
}

// serverRefuses is why net/http's server answers 400 to a request that
// http.ReadRequest accepts, "" when it does not.
func serverRefuses(r *http.Request) string {
	// http.ReadRequest takes Host out of the header into r.Host, and itself
	// refuses invalid field names and values. An empty Host field is taken
	// for a missing one here.
	switch {
	case r.ProtoAtLeast(1, 1) && r.Host == "" && r.Method != http.MethodConnect:
		return "missing Host"
	case strings.Trim(r.Host, hostBytes) != "":
		return "malformed Host"
	}
	return ""
}

// hostBytes are the bytes net/http's server accepts in a Host header.
const hostBytes = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!$%&()*+,-.:;=[]'_~"

// checkReceivedHeaders fails when the application's header holds a field
// the enforcer should not have passed on: hop-by-hop fields and those the
// client's Connection named, forwarding headers against the trust rule,
// routing headers, identity headers with several values or in a CGI
// lookalike spelling.
func checkReceivedHeaders(fail func(string, ...any), got, sent http.Header, peer, host string) {
	named := map[string]bool{}
	for _, v := range sent["Connection"] {
		for _, token := range strings.Split(v, ",") {
			if token = textproto.TrimString(token); token != "" {
				named[http.CanonicalHeaderKey(token)] = true
			}
		}
	}
	// Fields this hop writes itself whatever the client's Connection says.
	own := []string{"Content-Length", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}
	for k, vv := range got {
		if k == "Te" && slices.Equal(vv, []string{"trailers"}) {
			continue
		}
		if request.IsHopByHop(k) || k == "Expect" {
			fail("hop-by-hop field %s reached the application", k)
		}
		if named[k] && !slices.Contains(own, k) {
			fail("%s, named in the client's Connection, reached the application", k)
		}
		// CGI reads "X_Forwarded_For" as X-Forwarded-For: only a trusted
		// proxy may send forwarding headers in either spelling, nobody
		// routing headers.
		name := http.CanonicalHeaderKey(strings.ReplaceAll(k, "_", "-"))
		if name == "X-Original-Url" || name == "X-Rewrite-Url" ||
			(name != k && peer != trustedPeer && slices.Contains(clientForwardingHeaders, name)) {
			fail("%s reached the application", k)
		}
	}
	for _, k := range decidedIdentityHeaders {
		distinct := map[string]bool{}
		for _, v := range got[k] {
			distinct[strings.TrimSpace(v)] = true
		}
		if len(distinct) > 1 {
			fail("identity header %s reached the application with %d values: %q", k, len(distinct), got[k])
		}
		for g := range got {
			if g != k && strings.IndexByte(g, '_') >= 0 && http.CanonicalHeaderKey(strings.ReplaceAll(g, "_", "-")) == k {
				fail("%s reached the application, which CGI reads as %s", g, k)
			}
		}
	}

	trusted := peer == trustedPeer
	keep := func(k string) []string { // the client's field, if passed on
		if !trusted || named[k] {
			return nil
		}
		return sent[k]
	}
	want := map[string][]string{}
	for _, k := range clientForwardingHeaders {
		want[k] = keep(k)
	}
	if prior := keep("X-Forwarded-For"); len(prior) > 0 {
		want["X-Forwarded-For"] = []string{strings.Join(prior, ", ") + ", " + peer}
	} else {
		want["X-Forwarded-For"] = []string{peer}
	}
	if want["X-Forwarded-Host"] == nil && host != "" {
		want["X-Forwarded-Host"] = []string{host}
	}
	if want["X-Forwarded-Proto"] == nil {
		want["X-Forwarded-Proto"] = []string{"http"}
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			fail("the application got %s %q from a %s peer, want %q", k, got[k], map[bool]string{true: "trusted", false: "untrusted"}[trusted], w)
		}
	}
}

// clientForwardingHeaders are the fields by which proxies tell the application
// about the client.
var clientForwardingHeaders = []string{
	"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port",
	"X-Forwarded-Prefix", "X-Forwarded-Server", "X-Forwarded-Ssl", "X-Real-Ip",
}

// appHost is the host a Go application routes by: r.Host without port,
// brackets or trailing dot, in lower case.
func appHost(h string) string {
	if p := port(h); p != "" {
		h = h[:len(h)-len(p)-1]
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// port is the port of a Host value, "" without one.
func port(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && i > strings.LastIndexByte(h, ']') {
		return h[i+1:]
	}
	return ""
}

// symfonyOverride is the method Symfony's Request::getMethod (which
// Laravel uses) routes a POST as: X-HTTP-Method-Override, else _method of
// the form body, else of the query, both as PHP parses them.
func symfonyOverride(r *http.Request, body []byte) string {
	if r.Method != http.MethodPost {
		return ""
	}
	if v := r.Header.Get("X-Http-Method-Override"); v != "" {
		return strings.ToUpper(strings.TrimSpace(v))
	}
	if m := phpMethodField(formBody(r, body)); m != "" {
		return m
	}
	return phpMethodField(r.URL.RawQuery)
}

// phpMethodField is the last _method of a URL-encoded form as PHP fills
// $_GET and $_POST: pairs split at "&" only, names decoded, leading
// spaces dropped and " ", "." and a "[" without its "]" made "_".
func phpMethodField(form string) string {
	method := ""
	for _, pair := range strings.Split(form, "&") {
		k, v, _ := strings.Cut(pair, "=")
		name, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			continue
		}
		name = strings.TrimLeft(name, " ")
		if i := strings.IndexByte(name, '['); i > 0 && strings.IndexByte(name[i:], ']') < 0 {
			name = name[:i] + "_" + name[i+1:]
		}
		if strings.NewReplacer(" ", "_", ".", "_").Replace(name) == "_method" {
			method = strings.ToUpper(strings.TrimSpace(value))
		}
	}
	return method
}

// formBody is body if the application reads it as a URL-encoded form.
func formBody(r *http.Request, body []byte) string {
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && ct == "application/x-www-form-urlencoded" {
		return string(body)
	}
	return ""
}

// checkKey is what a check decides with: its policy, rule, tier and bucket.
func checkKey(c *rules.Check) string {
	return fmt.Sprintf("%s/%s tier=%q tenant=%x", c.Policy.Name, c.Rule.Name, c.Tier, string(c.Request.Bucket.Tenant))
}

func sameChecks(a, b []rules.Check) bool {
	return slices.EqualFunc(a, b, func(x, y rules.Check) bool { return checkKey(&x) == checkKey(&y) })
}

// containsChecks reports whether every check of sub is in all.
func containsChecks(all, sub []rules.Check) bool {
	for i := range sub {
		if !slices.ContainsFunc(all, func(c rules.Check) bool { return checkKey(&c) == checkKey(&sub[i]) }) {
			return false
		}
	}
	return true
}

func describe(checks []rules.Check) string {
	if len(checks) == 0 {
		return "no checks"
	}
	var s []string
	for i := range checks {
		s = append(s, checkKey(&checks[i]))
	}
	return strings.Join(s, "; ")
}
