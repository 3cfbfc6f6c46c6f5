package enforcer

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// The adversarial suite sends requests as raw bytes to the built enforcer
// in front of a byteApp and holds the enforcer to its one rule: it decides
// on exactly what the application receives, or refuses the request. For
// each request the application received, the rules the enforcer applied
// (RateLimit-Policy) must be those a framework would route the received
// bytes to under advPolicy, and a canonical request made from the received
// bytes must count in the same buckets (same tenant, tier and partition).

// advPolicy has a decision for each thing a request can change: an exempt
// path and an exempt host, a GET-only rule on a prefix, a rule partitioned
// by path, a rule on a host, and a tiered catch-all whose limit names the
// tier (q=1000 free, q=5000 premium). Its tokens are read unverified
// (verify: false): the attacks are on the request's bytes, and
// jwt_test.go checks verification. Every rule is a sliding window log:
// exact, so no window boundary or refill can change a count between an
// attack and the probe that checks it.
const advPolicy = `  responseHeaders: Both
  identity:
    sources: [{header: {name: X-Tenant-ID}}, {apiKey: {}}, {jwtClaim: {claim: tenant_id, verify: false}}]
  tiers: {source: {header: {name: X-Plan}}, default: free}
  rules:
    - name: health
      match: {paths: [{exact: /healthz}]}
      exempt: true
    - name: internal
      match: {hosts: [internal.example.com]}
      exempt: true
    - name: exports
      algorithm: SlidingWindowLog
      match: {methods: [GET], paths: [{prefix: /v1/exports}]}
      limits: [{requests: 1, period: 1m}]
    - name: items
      algorithm: SlidingWindowLog
      match: {paths: [{glob: /v1/items/*}]}
      identity:
        sources: [{header: {name: X-Tenant-ID}}, {apiKey: {}}, {jwtClaim: {claim: tenant_id, verify: false}}]
        partitionBy: [Path]
      limits: [{requests: 2, period: 1m}]
    - name: api-host
      algorithm: SlidingWindowLog
      match: {hosts: [api.example.com]}
      limits: [{requests: 1000, period: 1m}]
    - name: all
      algorithm: SlidingWindowLog
      limits: [{tier: free, requests: 1000, period: 1m}, {tier: premium, requests: 5000, period: 1m}]`

// allowed is what the contract allows for an attack.
type allowed int

const (
	// refused: an error answer (400, or 431/501 from the server), no byte
	// to the application.
	refused allowed = iota
	// forwarded: the application receives the request, decided as received.
	forwarded
	// either: refused, or forwarded and decided as received.
	either
)

func (o allowed) String() string {
	return [...]string{"refused", "forwarded", "refused or forwarded"}[o]
}

// attack is one adversarial exchange.
type attack struct {
	name string
	raw  string // sent at once on a new connection
	want allowed
	// target and host, when set, are the request-target and Host the
	// application must receive (for the first forwarded request).
	target, host string
	// head says the requests are HEAD: their answers have no body.
	head bool
	// then is sent after the first answer arrived (to an upgraded
	// connection, say).
	then string
	// quirk adapts the application-side view to a framework's routing
	// (method override, X-Original-URL...); nil is a plain router.
	quirk func(v *appView, r *appRequest)
}

// Building blocks of requests.
const (
	hostLine   = "Host: app.example.com"
	tenantLine = "X-Tenant-ID: acme"
	canaryVal  = `c4n4ry "v";q=1, x=%2F`
	canaryLine = "X-Canary: " + canaryVal
)

// rq is a request head: a request line and field lines, CRLF-terminated.
func rq(start string, fields ...string) string {
	return strings.Join(append([]string{start}, fields...), "\r\n") + "\r\n\r\n"
}

// std is GET target with the usual Host, tenant and canary, and fields.
func std(target string, fields ...string) string {
	return rq("GET "+target+" HTTP/1.1", append([]string{hostLine, tenantLine, canaryLine}, fields...)...)
}

// method is std with another method.
func method(m, target string, fields ...string) string {
	return rq(m+" "+target+" HTTP/1.1", append([]string{hostLine, tenantLine, canaryLine}, fields...)...)
}

// bare is target with only Host and fields.
func bare(target string, fields ...string) string {
	return rq("GET "+target+" HTTP/1.1", append([]string{hostLine, canaryLine}, fields...)...)
}

// token is an unsigned JWT naming tenant.
func token(tenant string) string { return jwt(`{"tenant_id":"` + tenant + `"}`) }

// runAttacks runs each attack against an enforcer of its own with policy
// spec, in parallel.
func runAttacks(t *testing.T, spec string, attacks []attack) {
	nonce := make([]byte, 4)
	_, _ = rand.Read(nonce)
	for i, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			// A namespace of the case's own, new at each run: the 1/min
			// buckets of an earlier run must not decide this one.
			ns := fmt.Sprintf("adv-%s-%d", hex.EncodeToString(nonce), i)
			// One start at a time: freeAddrs' ports are free only until
			// another parallel case listens or dials.
			app, e := func() (*byteApp, *instance) {
				startMu.Lock()
				defer startMu.Unlock()
				app := newByteApp(t)
				return app, start(t, setup{policies: policy("adv", spec), upstream: app.url, args: []string{"--pod-namespace", ns}})
			}()
			ex := exchange(t, e, a)
			time.Sleep(150 * time.Millisecond) // a smuggled request may still be on its way
			checkAttack(t, e, a, ex, app.requests())
		})
	}
}

var startMu sync.Mutex

// answer is one response the client read.
type answer struct {
	status int
	header http.Header
	body   string
	seq    int // X-App-Seq: the application's request it answers; 0 for none
}

type exchanged struct {
	answers []answer
	readErr error // why reading stopped: EOF, a timeout or garbage
}

// exchange sends a.raw on a new connection and reads answers until the
// connection closes or stays quiet.
func exchange(t *testing.T, e *instance, a attack) exchanged {
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, a.raw); err != nil {
		t.Logf("write: %v (the enforcer may have answered early)", err)
	}
	br := bufio.NewReader(conn)
	var ex exchanged
	wait := 5 * time.Second
	for {
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		var req *http.Request
		if a.head {
			req = &http.Request{Method: http.MethodHead}
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			ex.readErr = err
			return ex
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue // 100 Continue, 103 Early Hints: the final answer follows
		}
		seq, _ := strconv.Atoi(resp.Header.Get("X-App-Seq"))
		ex.answers = append(ex.answers, answer{resp.StatusCode, resp.Header, string(body), seq})
		if len(ex.answers) == 1 && a.then != "" {
			_, _ = io.WriteString(conn, a.then)
		}
		wait = 700 * time.Millisecond
	}
}

// checkAttack holds one exchange to the contract.
func checkAttack(t *testing.T, e *instance, a attack, ex exchanged, got []*appRequest) {
	g := NewWithT(t)
	summary := describe(ex, got)
	t.Log(summary)
	// A request cut short (the enforcer streamed its head, then the
	// client's body proved malformed) was never received whole.
	got = slices.DeleteFunc(got, func(r *appRequest) bool {
		return errors.Is(r.err, io.EOF) || errors.Is(r.err, io.ErrUnexpectedEOF)
	})
	for _, r := range got {
		g.Expect(r.err).NotTo(HaveOccurred(), "the enforcer forwarded bytes a strict HTTP/1.1 parser refuses: %q", r.raw)
	}
	answered := map[int]answer{}
	for _, an := range ex.answers {
		if an.seq == 0 {
			g.Expect(an.status).To(BeNumerically(">=", 400), "an answer of the enforcer's own that is no refusal")
			if strings.HasPrefix(an.header.Get("Content-Type"), "application/problem+json") && an.status == 400 {
				var p problem
				g.Expect(json.Unmarshal([]byte(an.body), &p)).To(Succeed(), an.body)
				g.Expect(p.Type).To(Equal("https://sluice.dev/problems/bad-request"), an.body)
			}
			continue
		}
		answered[an.seq] = an
	}
	for _, r := range got {
		_, ok := answered[r.seq]
		g.Expect(ok).To(BeTrue(), "the application received request %d, which no answer to the client accounts for "+
			"(smuggled or tunnelled past the enforcer's decisions): %q", r.seq, r.raw)
	}
	switch a.want {
	case refused:
		g.Expect(got).To(BeEmpty(), "the request must be refused, but the application received it: %q", rawOf(got))
		g.Expect(ex.answers).NotTo(BeEmpty(), "a refusal is an answer, not a closed connection (%v)", ex.readErr)
		if len(ex.answers) > 0 {
			g.Expect(ex.answers[0].status).To(BeElementOf(400, 431, 501), "a refusal of a malformed request")
		}
		return
	case forwarded:
		g.Expect(got).NotTo(BeEmpty(), "the request must reach the application")
	}
	if len(got) == 0 {
		if len(ex.answers) > 0 {
			g.Expect(ex.answers[0].status).NotTo(Equal(429), "refused by a limit, not as malformed")
		}
		return
	}
	var first *appRequest
	for _, r := range got {
		if r.err != nil {
			continue
		}
		v := viewOf(r, a.quirk)
		if first == nil {
			first = r
			if a.target != "" {
				g.Expect(r.target).To(Equal(a.target), "the request-target the application received")
			}
			if a.host != "" {
				g.Expect(v.hostField).To(Equal(a.host), "the Host the application received")
			}
		}
		g.Expect(v.problems).To(BeEmpty(), "what reached the application: %q", r.raw)
		an, ok := answered[r.seq]
		if !ok {
			continue
		}
		decided := appliedRules(an.header)
		g.Expect(decided).To(Equal(v.rules()), "rules decided (RateLimit-Policy) vs rules a router gives %s %s for host %q: %q",
			v.method, v.path, v.host, r.raw)
		if slices.Contains(decided, "all") {
			g.Expect(quota(an.header, "all")).To(Equal(map[string]string{"free": "1000", "premium": "5000"}[v.tier]),
				"the tier decided vs the tier the application received (%q)", v.tier)
		}
		if contains(r.fields, "X-Canary") || (r == first && firstHasCanary(a.raw)) {
			g.Expect(r.values("X-Canary")).To(Equal([]string{canaryVal}), "a plain header reaches the application once, unchanged")
		}
	}
	if len(got) == 1 && first != nil && first.err == nil {
		if an, ok := answered[first.seq]; ok {
			probeSameBuckets(t, g, e, viewOf(first, a.quirk), an)
		}
	}
}

// firstHasCanary reports whether the first request of raw has the canary.
func firstHasCanary(raw string) bool {
	head, _, _ := strings.Cut(strings.ReplaceAll(raw, "\r\n", "\n"), "\n\n")
	return strings.Contains(head, canaryLine)
}

func rawOf(rr []*appRequest) []string {
	var s []string
	for _, r := range rr {
		s = append(s, string(r.raw))
	}
	return s
}

func contains(ff []field, name string) bool {
	for _, f := range ff {
		if strings.EqualFold(f.name, name) {
			return true
		}
	}
	return false
}

// describe says what happened, for the test log.
func describe(ex exchanged, got []*appRequest) string {
	var b strings.Builder
	for i, an := range ex.answers {
		fmt.Fprintf(&b, "answer %d: %d seq=%d policy=%q type=%q body=%.120q\n", i+1, an.status, an.seq,
			an.header.Get("RateLimit-Policy"), an.header.Get("Content-Type"), an.body)
	}
	fmt.Fprintf(&b, "read ended: %v\n", ex.readErr)
	for _, r := range got {
		fmt.Fprintf(&b, "application request %d (err %v): %q\n", r.seq, r.err, r.raw)
	}
	return b.String()
}

// appliedRules are the rules RateLimit-Policy names, without the policy.
func appliedRules(h http.Header) []string {
	var rules []string
	for _, m := range regexp.MustCompile(`"adv/([a-z-]+)"`).FindAllStringSubmatch(h.Get("RateLimit-Policy"), -1) {
		rules = append(rules, m[1])
	}
	return rules
}

// quota is rule's q in RateLimit-Policy.
func quota(h http.Header, rule string) string {
	m := regexp.MustCompile(`"adv/` + rule + `";q=(\d+)`).FindStringSubmatch(h.Get("RateLimit-Policy"))
	if m == nil {
		return ""
	}
	return m[1]
}

// remaining is each rule's r in RateLimit.
func remaining(h http.Header) map[string]int {
	out := map[string]int{}
	for _, m := range regexp.MustCompile(`"adv/([a-z-]+)";r=(\d+)`).FindAllStringSubmatch(h.Get("RateLimit"), -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}

// probeSameBuckets sends the canonical request the application saw (its
// method as routed, cleaned path, Host, tenant source and tier) and checks
// that it counts in the buckets the attack counted in: one fewer
// remaining in each, or 429 where the attack took the last (and then the
// others as the attack left them, the probe refunded).
func probeSameBuckets(t *testing.T, g Gomega, e *instance, v appView, an answer) {
	before := remaining(an.header)
	if len(before) == 0 {
		return // exempt: nothing was counted
	}
	p := v.path
	if slices.Contains(v.rules(), "items") {
		p = strings.ToLower(p) // partitionBy Path keys on the lower-cased path
	}
	target := (&url.URL{Path: p}).EscapedPath()
	headers := []string{"Host: " + v.hostField}
	if v.tenantField != "" {
		headers = append(headers, v.tenantField+": "+v.tenantValue)
	}
	if v.tier == "premium" {
		headers = append(headers, "X-Plan: premium")
	}
	m := v.method
	if m == http.MethodHead {
		m = http.MethodGet
	}
	r := do(t, m, e.url+target, headers...)
	after := remaining(r.header)
	desc := fmt.Sprintf("probe %s %s %q after the attack (attack left %v, probe %v, status %d)", m, target, headers, before, after, r.status)
	g.Expect(slices.Sorted(mapKeys(after))).To(Equal(slices.Sorted(mapKeys(before))), desc)
	exhausted := false
	for _, n := range before {
		exhausted = exhausted || n == 0
	}
	// A refused probe is refunded in the other rules: they show what they
	// showed after the attack (a bucket of its own would show its full
	// limit), and an admitted probe one fewer.
	for rule, n := range before {
		switch {
		case n == 0:
			g.Expect(after[rule]).To(Equal(0), desc)
		case exhausted:
			g.Expect(after[rule]).To(Equal(n), "%s: the refused probe is refunded in the bucket the attack counted in", desc)
		default:
			g.Expect(after[rule]).To(Equal(n-1), "%s: the probe must count in the bucket the attack counted in", desc)
		}
	}
	if exhausted {
		g.Expect(r.status).To(Equal(429), "%s: the attack took the last request of a bucket", desc)
	}
}

func mapKeys(m map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// appView is a request as an application behind the enforcer routes it.
type appView struct {
	method    string // upper case, as werkzeug and Express give it
	path      string // decoded and cleaned
	host      string // lower case, no port: what host rules match
	hostField string // the Host field as received
	// tenantField and tenantValue are the identity source that names the
	// tenant, in advPolicy's order, "" for the anonymous tenant.
	tenantField, tenantValue string
	tier                     string
	problems                 []string
}

func (v *appView) problem(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

// rules are the rules of advPolicy that apply to the view, in policy order.
func (v appView) rules() []string {
	if v.path == "/healthz" || v.host == "internal.example.com" {
		return nil
	}
	var rules []string
	lp := strings.ToLower(v.path)
	if (v.method == http.MethodGet || v.method == http.MethodHead) && (lp == "/v1/exports" || strings.HasPrefix(lp, "/v1/exports/")) {
		rules = append(rules, "exports")
	}
	if regexp.MustCompile(`^/v1/items/[^/]+/?$`).MatchString(lp) {
		rules = append(rules, "items")
	}
	if v.host == "api.example.com" {
		rules = append(rules, "api-host")
	}
	return append(rules, "all")
}

// viewOf parses r as applications do and notes each way in which it breaks
// the forwarding contract.
func viewOf(r *appRequest, quirk func(*appView, *appRequest)) appView {
	rc := *r // a quirk may add fields
	rc.fields = slices.Clone(r.fields)
	r = &rc
	v := appView{method: strings.ToUpper(r.method), tier: "free"}
	v.path = targetPath(&v, r.target)

	hosts := r.values("Host")
	if len(hosts) != 1 {
		v.problem("%d Host fields", len(hosts))
	} else {
		v.hostField = hosts[0]
		h := hosts[0]
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		v.host = strings.Trim(h, "[]")
		if hosts[0] != strings.ToLower(hosts[0]) || strings.HasSuffix(v.host, ".") {
			v.problem("Host %q is not lower case without a trailing dot", hosts[0])
		}
	}

	for _, name := range []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Trailer", "Upgrade"} {
		if vv := r.values(name); len(vv) > 0 {
			v.problem("hop-by-hop %s: %q reached the application", name, vv)
		}
	}
	if te := r.values("Te"); len(te) > 0 && !(len(te) == 1 && te[0] == "trailers") {
		v.problem("Te %q reached the application", te)
	}
	if te := r.values("Transfer-Encoding"); len(te) > 0 && !(len(te) == 1 && te[0] == "chunked") {
		v.problem("Transfer-Encoding %q reached the application", te)
	}
	for _, want := range [][2]string{{"X-Forwarded-For", "127.0.0.1"}, {"X-Forwarded-Proto", "http"}, {"X-Forwarded-Host", v.hostField}} {
		vv := r.values(want[0])
		if want[0] == "X-Forwarded-Host" && len(vv) == 0 {
			continue // no Host to forward (HTTP/1.0)
		}
		if len(vv) != 1 || vv[0] != want[1] {
			v.problem("%s is %q, not the enforcer's %q alone: a client's own value reached the application", want[0], vv, want[1])
		}
	}
	for _, name := range []string{"Forwarded", "X-Real-Ip", "X-Forwarded-Port", "X-Forwarded-Prefix"} {
		if vv := r.values(name); len(vv) > 0 {
			v.problem("a client's %s %q reached the application", name, vv)
		}
	}
	for _, f := range r.fields {
		if strings.Contains(f.name, "_") && slices.Contains([]string{"X-TENANT-ID", "X-API-KEY", "AUTHORIZATION", "X-PLAN",
			"X-FORWARDED-FOR", "X-FORWARDED-HOST", "X-FORWARDED-PROTO", "X-REAL-IP"}, cgiName(f.name)) {
			v.problem("%s reached the application, which CGI and FastCGI read as %s", f.name, cgiName(f.name))
		}
	}

	single := func(name string) (string, bool) {
		vv := r.values(name)
		distinct := map[string]bool{}
		for _, x := range vv {
			distinct[strings.TrimSpace(x)] = true
		}
		if len(distinct) > 1 {
			v.problem("%s has %d different values at the application: %q", name, len(distinct), vv)
		}
		if len(vv) == 0 {
			return "", false
		}
		return strings.TrimSpace(vv[len(vv)-1]), true
	}
	if quirk != nil {
		quirk(&v, r)
	}
	tenant, _ := single("X-Tenant-ID")
	key, _ := single("X-API-Key")
	auth, _ := single("Authorization")
	plan, _ := single("X-Plan")
	switch {
	case tenant != "":
		v.tenantField, v.tenantValue = "X-Tenant-ID", tenant
	case key != "":
		v.tenantField, v.tenantValue = "X-API-Key", key
	default:
		if tok, claim := bearerClaim(auth); claim != "" {
			v.tenantField, v.tenantValue = "Authorization", "Bearer "+tok
		}
	}
	if plan == "premium" {
		v.tier = "premium"
	}
	return v
}

// bearerClaim reads the tenant_id claim of "<scheme> <token>" the way JWT
// libraries do: the scheme in any case, any whitespace after it.
func bearerClaim(auth string) (tok, claim string) {
	scheme, rest, ok := strings.Cut(strings.Replace(auth, "\t", " ", 1), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ""
	}
	tok = strings.TrimSpace(rest)
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", ""
	}
	data, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return "", ""
	}
	var claims struct {
		TenantID string `json:"tenant_id"`
	}
	if json.Unmarshal(data, &claims) != nil {
		return "", ""
	}
	return tok, claims.TenantID
}

// targetPath is the path routers make of an origin-form target; it notes
// a target whose path routers would not all agree on, or that is not in
// the canonical form the enforcer forwards.
func targetPath(v *appView, target string) string {
	if !strings.HasPrefix(target, "/") {
		v.problem("request-target %q is not origin-form", target)
		return target
	}
	if strings.ContainsAny(target, "#\\") {
		v.problem("request-target %q holds '#' or '\\'", target)
	}
	raw, _, _ := strings.Cut(target, "?")
	lower := strings.ToLower(raw)
	for _, bad := range []string{";", "%2f", "%5c", "%3b", "%00", "%7f"} {
		if strings.Contains(lower, bad) {
			v.problem("path %q holds %q, which routers read differently", raw, bad)
		}
	}
	for c := 1; c < 0x20; c++ {
		if strings.Contains(lower, fmt.Sprintf("%%%02x", c)) {
			v.problem("path %q holds an encoded control character", raw)
		}
	}
	decoded, err := url.PathUnescape(raw)
	if err != nil {
		v.problem("path %q does not decode: %v", raw, err)
		return raw
	}
	if clean := cleanLikeServeMux(decoded); clean != decoded {
		v.problem("path %q is not clean (%q): the application may route it as %q", raw, decoded, clean)
	}
	for i := 0; i+2 < len(raw); i++ {
		if raw[i] == '%' {
			if b, err := strconv.ParseUint(raw[i+1:i+3], 16, 8); err == nil && isUnreserved(byte(b)) {
				v.problem("path %q encodes the unreserved %q: not canonical", raw, string(rune(b)))
			}
		}
	}
	return cleanLikeServeMux(decoded)
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// cleanLikeServeMux cleans p as Go's ServeMux (and nginx's merge_slashes
// with dot-segment removal) does, keeping a trailing slash.
func cleanLikeServeMux(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// TestAdversarialRequests sends every class of request that could reach the
// application otherwise than the limiter decided on, each with variants.
func TestAdversarialRequests(t *testing.T) {
	var attacks []attack
	for _, class := range [][]attack{hopByHopAttacks(), targetAttacks(), methodAttacks(), identityAttacks(),
		syntaxAttacks(), hostAttacks(), forwardingAttacks(), framingAttacks()} {
		attacks = append(attacks, class...)
	}
	runAttacks(t, advPolicy, attacks)
}

func hopByHopAttacks() []attack {
	return []attack{
		{name: "Connection names X-Tenant-ID", raw: std("/v1/exports", "Connection: X-Tenant-ID"), want: forwarded},
		{name: "Connection names x-tenant-id in lower case", raw: std("/v1/exports", "Connection: x-tenant-id"), want: forwarded},
		{name: "Connection lists X-Tenant-ID after keep-alive", raw: std("/v1/exports", "Connection: keep-alive,X-Tenant-ID"), want: forwarded},
		{name: "second Connection field names X-Tenant-ID", raw: std("/v1/exports", "Connection: keep-alive", "Connection: X-Tenant-ID"), want: forwarded},
		{name: "Connection names X-Tenant-ID with whitespace and empty members", raw: std("/v1/exports", "Connection: ,\t X-Tenant-ID \t,"), want: forwarded},
		{name: "Connection before the tenant header it names", raw: rq("GET /v1/exports HTTP/1.1", hostLine, "Connection: X-Tenant-ID", tenantLine, canaryLine), want: forwarded},
		{name: "Connection names X-API-Key", raw: bare("/v1/exports", "X-API-Key: k-1", "Connection: X-API-Key"), want: forwarded},
		{name: "Connection names Authorization", raw: bare("/v1/exports", "Authorization: Bearer "+token("acme"), "Connection: Authorization"), want: forwarded},
		{name: "Connection names X-Tenant-ID with an API key behind it", raw: std("/v1/exports", "X-API-Key: k-1", "Connection: X-Tenant-ID"), want: forwarded},
		{name: "Connection names X-Plan", raw: std("/v1/orders", "X-Plan: premium", "Connection: X-Plan"), want: forwarded},
		{name: "Connection names Host", raw: std("/v1/exports", "Connection: Host"), want: either},
		{name: "Connection names X-Forwarded-For", raw: std("/v1/exports", "X-Forwarded-For: 198.51.100.7", "Connection: X-Forwarded-For"), want: forwarded},
		{name: "Proxy-Connection names X-Tenant-ID", raw: std("/v1/exports", "Proxy-Connection: X-Tenant-ID"), want: forwarded},
		{name: "hop-by-hop fields are not forwarded", raw: std("/v1/exports", "Keep-Alive: timeout=5", "Proxy-Authorization: Basic eDp5", "Te: gzip", "Proxy-Authenticate: Basic"), want: forwarded},
		{name: "Upgrade without Connection Upgrade", raw: std("/v1/exports", "Upgrade: websocket"), want: either},
	}
}

func targetAttacks() []attack {
	return []attack{
		{name: "fragment", raw: std("/v1/exports#frag"), want: refused},
		{name: "fragment hiding dot segments to an exempt path", raw: std("/v1/exports#/../../healthz"), want: refused},
		{name: "fragment after an exempt path", raw: std("/healthz#/../v1/exports"), want: refused},
		{name: "fragment in the query", raw: std("/v1/exports?a=1#x"), want: refused},
		{name: "empty fragment", raw: std("/v1/exports#"), want: refused},
		{name: "encoded hash is a path character", raw: std("/v1/exports%23x"), want: either},
		{name: "asterisk-form GET", raw: std("*"), want: refused},
		{name: "asterisk-form OPTIONS", raw: method("OPTIONS", "*"), want: refused},
		{name: "authority-form CONNECT", raw: method("CONNECT", "app.example.com:443"), want: refused},
		{name: "authority-form GET", raw: std("app.example.com:80"), want: refused},
		{name: "CONNECT with an origin-form target", raw: method("CONNECT", "/v1/exports"), want: refused},
		{name: "absolute-form names the host", raw: std("http://api.example.com/v1/exports"), want: forwarded, target: "/v1/exports", host: "api.example.com"},
		{name: "absolute-form in upper case", raw: std("HTTP://API.EXAMPLE.COM/v1/exports"), want: either, target: "/v1/exports"},
		{name: "absolute-form with a trailing dot", raw: std("http://api.example.com./v1/exports"), want: either},
		{name: "absolute-form with a port", raw: std("http://api.example.com:8080/v1/exports"), want: forwarded, target: "/v1/exports", host: "api.example.com:8080"},
		{name: "absolute-form to the exempt host", raw: std("http://internal.example.com/v1/exports"), want: forwarded, host: "internal.example.com"},
		{name: "absolute-form away from the exempt Host field", raw: rq("GET http://app.example.com/v1/exports HTTP/1.1", "Host: internal.example.com", tenantLine, canaryLine), want: forwarded, host: "app.example.com"},
		{name: "absolute-form https", raw: std("https://api.example.com/v1/exports"), want: either},
		{name: "absolute-form without a path", raw: std("http://api.example.com"), want: either},
		{name: "absolute-form with userinfo", raw: std("http://user:pw@internal.example.com/v1/exports"), want: either},
		{name: "absolute-form with dot segments", raw: std("http://api.example.com/v1/../healthz/../v1/exports"), want: either},
		{name: "absolute-form with a fragment", raw: std("http://api.example.com/v1/exports#x"), want: refused},
		{name: "absolute-form of another scheme", raw: std("ftp://internal.example.com/v1/exports"), want: either},
		{name: "absolute-form without a host", raw: std("http:///v1/exports"), want: either},
		{name: "scheme-relative origin-form", raw: std("//internal.example.com/v1/exports"), want: either},

		{name: "encoded NUL", raw: std("/v1/exports%00"), want: refused},
		{name: "encoded NUL before an exempt suffix", raw: std("/healthz%00/../v1/exports"), want: refused},
		{name: "encoded LF", raw: std("/v1/exports%0a"), want: refused},
		{name: "encoded CRLF", raw: std("/v1/exports%0D%0AX-Tenant-ID:%20fresh"), want: refused},
		{name: "encoded tab", raw: std("/v1/exports%09"), want: refused},
		{name: "encoded unit separator", raw: std("/v1/%1fexports"), want: refused},
		{name: "encoded DEL", raw: std("/v1/exports%7F"), want: refused},
		{name: "raw tab", raw: std("/v1/exp\torts"), want: refused},
		{name: "raw DEL", raw: std("/v1/exports\x7f"), want: refused},
		{name: "raw control character", raw: std("/v1/\x01exports"), want: refused},

		{name: "backslash", raw: std(`/v1\exports`), want: refused},
		{name: "backslash dot segments", raw: std(`/healthz\..\v1\exports`), want: refused},
		{name: "encoded backslash", raw: std("/v1%5Cexports"), want: refused},
		{name: "encoded backslash lower case", raw: std("/healthz%5c..%5cv1/exports"), want: refused},

		{name: "encoded slash", raw: std("/v1%2Fexports"), want: refused},
		{name: "encoded slash lower case", raw: std("/v1%2fexports"), want: refused},
		{name: "encoded slash dot segments", raw: std("/healthz%2F..%2Fv1%2Fexports"), want: refused},
		{name: "encoded slash at the end", raw: std("/v1/exports%2F"), want: refused},
		{name: "double-encoded slash is a literal", raw: std("/v1%252Fexports"), want: either, target: "/v1%252Fexports"},

		{name: "semicolon parameter", raw: std("/v1/exports;jsessionid=1"), want: refused},
		{name: "empty semicolon parameter", raw: std("/v1/exports;"), want: refused},
		{name: "semicolon in a middle segment", raw: std("/v1;x=y/exports"), want: refused},
		{name: "semicolon dot-dot (Tomcat)", raw: std("/healthz/..;/v1/exports"), want: refused},
		{name: "semicolon hiding dot-dot", raw: std("/healthz;/../v1/exports"), want: refused},
		{name: "encoded semicolon", raw: std("/v1/exports%3Bx"), want: refused},
		{name: "encoded semicolon lower case", raw: std("/v1/exports%3b"), want: refused},
		{name: "semicolon in the query is kept", raw: std("/v1/exports?a=1;b=2"), want: forwarded, target: "/v1/exports?a=1;b=2"},

		{name: "dot segment", raw: std("/v1/./exports"), want: forwarded, target: "/v1/exports"},
		{name: "dot-dot segment", raw: std("/v1/x/../exports"), want: forwarded, target: "/v1/exports"},
		{name: "dot-dot out of an exempt path", raw: std("/healthz/../v1/exports"), want: forwarded, target: "/v1/exports"},
		{name: "dot-dot into an exempt path", raw: std("/v1/exports/../../healthz"), want: forwarded, target: "/healthz"},
		{name: "encoded dot", raw: std("/v1/%2e/exports"), want: forwarded, target: "/v1/exports"},
		{name: "encoded dot-dot", raw: std("/healthz/%2E%2E/v1/exports"), want: forwarded, target: "/v1/exports"},
		{name: "half-encoded dot-dot", raw: std("/healthz/.%2e/v1/exports"), want: forwarded, target: "/v1/exports"},
		{name: "dot-dot above the root", raw: std("/../../v1/exports"), want: forwarded, target: "/v1/exports"},
		{name: "trailing dot-dot", raw: std("/v1/exports/x/.."), want: forwarded, target: "/v1/exports"},
		{name: "trailing dot", raw: std("/v1/exports/."), want: forwarded, target: "/v1/exports"},
		{name: "dot before an exempt path", raw: std("/./healthz"), want: forwarded, target: "/healthz"},
		{name: "double slashes", raw: std("//v1//exports"), want: forwarded, target: "/v1/exports"},
		{name: "triple slash before an exempt path", raw: std("///healthz"), want: forwarded, target: "/healthz"},
		{name: "trailing double slash", raw: std("/v1/exports//"), want: forwarded, target: "/v1/exports/"},
		{name: "overlong UTF-8 dots", raw: std("/healthz/%c0%ae%c0%ae/v1/exports"), want: either},
		{name: "double-encoded dots are literal", raw: std("/healthz/%252e%252e/v1/exports"), want: either},

		{name: "encoded letter", raw: std("/v1/%65xports"), want: forwarded, target: "/v1/exports"},
		{name: "every letter encoded", raw: std("/%76%31/%65%78%70%6f%72%74%73"), want: forwarded, target: "/v1/exports"},
		{name: "encoded upper-case letters", raw: std("/v1/%45XPORTS"), want: forwarded, target: "/v1/EXPORTS"},
		{name: "encoded space at the end", raw: std("/v1/exports%20"), want: either},
		{name: "encoded non-ASCII", raw: std("/v1/%C3%A9xports"), want: either},
		{name: "raw non-ASCII", raw: std("/v1/\xc3\xa9xports"), want: either},
		{name: "invalid escape", raw: std("/v1/%zzexports"), want: refused},
		{name: "truncated escape", raw: std("/v1/exports%2"), want: refused},
		{name: "IIS unicode escape", raw: std("/v1/%u0065xports"), want: refused},

		{name: "upper-case path", raw: std("/V1/EXPORTS"), want: forwarded},
		{name: "mixed-case path below the prefix", raw: std("/v1/Exports/42"), want: forwarded},
		{name: "upper-case exempt path is not exempt", raw: std("/HEALTHZ"), want: forwarded},
		{name: "upper-case partitioned path", raw: std("/v1/items/ABC"), want: forwarded},
		{name: "encoded partitioned path", raw: std("/v1/items/%61bc"), want: forwarded, target: "/v1/items/abc"},
		{name: "query holding dot segments", raw: std("/v1/exports?/../../healthz"), want: forwarded, target: "/v1/exports?/../../healthz"},
		{name: "exempt path with a query to elsewhere", raw: std("/healthz?/../v1/exports"), want: forwarded, target: "/healthz?/../v1/exports"},
		{name: "query kept byte for byte", raw: std("/v1/exports?q=%2F%5C%3B%2e&x=a+b"), want: forwarded, target: "/v1/exports?q=%2F%5C%3B%2e&x=a+b"},
	}
}

func methodAttacks() []attack {
	return []attack{
		{name: "lower-case get", raw: method("get", "/v1/exports"), want: refused},
		{name: "capitalised Get", raw: method("Get", "/v1/exports"), want: refused},
		{name: "mixed-case gEt", raw: method("gEt", "/v1/exports"), want: refused},
		// net/http takes "head" for an extension method: the refusal has a body.
		{name: "lower-case head", raw: method("head", "/v1/exports"), want: refused},
		{name: "lower-case post", raw: method("post", "/v1/orders", "Content-Length: 0"), want: refused},
		{name: "HEAD counts as GET", raw: method("HEAD", "/v1/exports"), want: forwarded, head: true},
		{name: "HEAD on an upper-case path", raw: method("HEAD", "/V1/EXPORTS/1"), want: forwarded, head: true},
		{name: "OPTIONS is not GET", raw: method("OPTIONS", "/v1/exports"), want: forwarded},
		{name: "extension method", raw: method("PURGE", "/v1/exports"), want: forwarded},
		{name: "extension method that starts like GET", raw: method("GETS", "/v1/exports"), want: forwarded},
		{name: "two spaces after the method", raw: rq("GET  /v1/exports HTTP/1.1", hostLine, tenantLine), want: refused},
		{name: "tabs between request-line parts", raw: rq("GET\t/v1/exports\tHTTP/1.1", hostLine, tenantLine), want: refused},
		{name: "HTTP/0.9 request line", raw: "GET /v1/exports\r\n\r\n", want: refused},
	}
}

func identityAttacks() []attack {
	return []attack{
		{name: "duplicate X-Tenant-ID", raw: rq("GET /v1/exports HTTP/1.1", hostLine, "X-Tenant-ID: fresh", "X-Tenant-ID: acme"), want: refused},
		{name: "duplicate X-Tenant-ID in another case", raw: std("/v1/exports", "x-tenant-id: fresh"), want: refused},
		{name: "duplicate X-Tenant-ID far apart", raw: rq("GET /v1/exports HTTP/1.1", "X-Tenant-ID: fresh", hostLine, canaryLine, "Accept: */*", tenantLine), want: refused},
		{name: "empty X-Tenant-ID then a value", raw: rq("GET /v1/exports HTTP/1.1", hostLine, "X-Tenant-ID:", tenantLine), want: refused},
		{name: "duplicate X-Tenant-ID with the same value", raw: std("/v1/exports", tenantLine), want: either},
		{name: "duplicate X-Tenant-ID equal after trimming", raw: std("/v1/exports", "X-Tenant-ID: \tacme "), want: either},
		{name: "comma list in one X-Tenant-ID", raw: rq("GET /v1/exports HTTP/1.1", hostLine, "X-Tenant-ID: acme, fresh"), want: forwarded},
		{name: "duplicate X-API-Key", raw: bare("/v1/exports", "X-API-Key: k-1", "X-API-Key: k-2"), want: refused},
		{name: "duplicate Authorization", raw: bare("/v1/exports", "Authorization: Bearer "+token("acme"), "Authorization: Bearer "+token("fresh")), want: refused},
		{name: "duplicate X-Plan", raw: std("/v1/orders", "X-Plan: free", "X-Plan: premium"), want: refused},
		{name: "underscore X_Tenant_ID alone", raw: bare("/v1/exports", "X_Tenant_ID: fresh"), want: refused},
		{name: "underscore X_Tenant_ID beside X-Tenant-ID", raw: std("/v1/exports", "X_Tenant_ID: fresh"), want: refused},
		{name: "one underscore X-Tenant_ID", raw: std("/v1/exports", "X-Tenant_ID: fresh"), want: refused},
		{name: "underscore X_API_KEY", raw: bare("/v1/exports", "X_API_KEY: k-9"), want: refused},
		{name: "underscore X_Plan", raw: std("/v1/orders", "X_Plan: premium"), want: refused},
		{name: "tenant then API key", raw: std("/v1/exports", "X-API-Key: k-1"), want: forwarded},
		{name: "empty tenant falls to the API key", raw: bare("/v1/exports", "X-Tenant-ID:", "X-API-Key: k-1"), want: forwarded},
		{name: "tenant in tabs", raw: bare("/v1/exports", "X-Tenant-ID:\tacme\t"), want: forwarded},
		{name: "tenant without a space", raw: bare("/v1/exports", "X-Tenant-ID:acme"), want: forwarded},
		{name: "tenant in many spaces", raw: bare("/v1/exports", "X-Tenant-ID:     acme     "), want: forwarded},
		{name: "tenant header name in upper case", raw: bare("/v1/exports", "X-TENANT-ID: acme"), want: forwarded},
		{name: "tenant header name in lower case", raw: bare("/v1/exports", "x-tenant-id: acme"), want: forwarded},
		{name: "bearer scheme in lower case", raw: bare("/v1/exports", "Authorization: bearer "+token("acme")), want: forwarded},
		{name: "bearer token after two spaces", raw: bare("/v1/exports", "Authorization: Bearer  "+token("acme")), want: forwarded},
		{name: "tier in upper-case name", raw: std("/v1/orders", "X-PLAN: premium"), want: forwarded},
		{name: "tier with tabs", raw: std("/v1/orders", "X-Plan:\tpremium\t"), want: forwarded},
	}
}

func syntaxAttacks() []attack {
	longTenant := strings.Repeat("t", 60<<10)
	return []attack{
		{name: "obs-fold continues X-Tenant-ID", raw: rq("GET /v1/exports HTTP/1.1", hostLine, "X-Tenant-ID: fresh", " acme"), want: either},
		{name: "obs-fold with a tab", raw: rq("GET /v1/exports HTTP/1.1", hostLine, "X-Tenant-ID: fresh", "\tacme"), want: either},
		{name: "space before the colon", raw: rq("GET /v1/exports HTTP/1.1", hostLine, "X-Tenant-ID : fresh"), want: either},
		{name: "tab before the colon", raw: rq("GET /v1/exports HTTP/1.1", hostLine, "X-Tenant-ID\t: fresh"), want: either},
		{name: "whitespace before the first field", raw: rq("GET /v1/exports HTTP/1.1", " X-Tenant-ID: fresh", hostLine), want: either},
		{name: "bare LF line endings", raw: strings.ReplaceAll(std("/v1/exports"), "\r\n", "\n"), want: either},
		{name: "bare LF hiding a duplicate tenant", raw: "GET /v1/exports HTTP/1.1\r\nHost: app.example.com\r\nX-Tenant-ID: fresh\nX-Tenant-ID: acme\r\n\r\n", want: refused},
		{name: "bare CR inside a value", raw: "GET /v1/exports HTTP/1.1\r\nHost: app.example.com\r\nX-Tenant-ID: fresh\rX-Plan: premium\r\n\r\n", want: either},
		{name: "NUL in the tenant", raw: bare("/v1/exports", "X-Tenant-ID: acme\x00fresh"), want: refused},
		{name: "NUL in a field name", raw: bare("/v1/exports", "X-Tenant-ID\x00: fresh", tenantLine), want: refused},
		{name: "vertical tab around the tenant", raw: bare("/v1/exports", "X-Tenant-ID: \x0bacme\x0b"), want: either},
		{name: "form feed around the tenant", raw: bare("/v1/exports", "X-Tenant-ID: acme\x0c"), want: either},
		{name: "60 KiB tenant", raw: bare("/v1/exports", "X-Tenant-ID: "+longTenant), want: forwarded},
		{name: "2 MiB field", raw: std("/v1/exports", "X-Pad: "+strings.Repeat("p", 2<<20)), want: refused},
		{name: "64 KiB path", raw: std("/v1/exports/" + strings.Repeat("a", 64<<10)), want: either},
		{name: "empty field name", raw: std("/v1/exports", ": fresh"), want: either},
		{name: "field without a colon", raw: std("/v1/exports", "X-Tenant-ID fresh"), want: either},
	}
}

func hostAttacks() []attack {
	hostReq := func(host string) string {
		return rq("GET /v1/exports HTTP/1.1", "Host: "+host, tenantLine, canaryLine)
	}
	return []attack{
		{name: "Host in upper case", raw: hostReq("API.EXAMPLE.COM"), want: forwarded, host: "api.example.com"},
		{name: "Host with a trailing dot", raw: hostReq("api.example.com."), want: forwarded, host: "api.example.com"},
		{name: "Host mixed case, trailing dot and port", raw: hostReq("API.Example.Com.:8080"), want: forwarded, host: "api.example.com:8080"},
		{name: "exempt Host with a trailing dot", raw: hostReq("internal.example.com."), want: forwarded, host: "internal.example.com"},
		{name: "exempt Host in upper case", raw: hostReq("INTERNAL.example.com"), want: forwarded, host: "internal.example.com"},
		{name: "Host with two trailing dots", raw: hostReq("api.example.com.."), want: either},
		{name: "Host with an empty port", raw: hostReq("api.example.com:"), want: either},
		{name: "Host with userinfo", raw: hostReq("app.example.com@internal.example.com"), want: refused},
		{name: "Host with a path", raw: hostReq("internal.example.com/v1"), want: refused},
		{name: "Host with a fragment", raw: hostReq("internal.example.com#"), want: refused},
		{name: "Host list", raw: hostReq("app.example.com, internal.example.com"), want: refused},
		{name: "Host with a space", raw: hostReq("app.example.com internal.example.com"), want: refused},
		{name: "Host with an encoded character", raw: hostReq("internal.example.com%2e"), want: refused},
		{name: "Host with a backslash", raw: hostReq(`internal.example.com\x`), want: refused},
		{name: "two Host fields", raw: rq("GET /v1/exports HTTP/1.1", "Host: app.example.com", "Host: internal.example.com", tenantLine), want: refused},
		{name: "Host IPv6 literal", raw: hostReq("[::1]:8080"), want: forwarded, host: "[::1]:8080"},
		{name: "Host IPv4 literal", raw: hostReq("127.0.0.1"), want: forwarded, host: "127.0.0.1"},
		{name: "Host with an underscore", raw: hostReq("api_example.com"), want: either},
		{name: "empty Host", raw: hostReq(""), want: either},
		{name: "HTTP/1.1 without Host", raw: rq("GET /v1/exports HTTP/1.1", tenantLine), want: refused},
		{name: "HTTP/1.0 without Host", raw: rq("GET /v1/exports HTTP/1.0", tenantLine, canaryLine), want: either},
		{name: "HTTP/1.0 absolute-form", raw: rq("GET http://api.example.com/v1/exports HTTP/1.0", tenantLine, canaryLine), want: either},
	}
}

func forwardingAttacks() []attack {
	return []attack{
		{name: "client X-Forwarded-For", raw: std("/v1/exports", "X-Forwarded-For: 198.51.100.7"), want: forwarded},
		{name: "client X-Forwarded-Host to the exempt host", raw: std("/v1/exports", "X-Forwarded-Host: internal.example.com"), want: forwarded},
		{name: "client x-forwarded-host in lower case", raw: std("/v1/exports", "x-forwarded-host: internal.example.com"), want: forwarded},
		{name: "client X-Forwarded-Proto", raw: std("/v1/exports", "X-Forwarded-Proto: https"), want: forwarded},
		{name: "client X-Forwarded-Port", raw: std("/v1/exports", "X-Forwarded-Port: 443"), want: forwarded},
		{name: "client X-Forwarded-Prefix", raw: std("/v1/exports", "X-Forwarded-Prefix: /healthz"), want: forwarded},
		{name: "client X-Real-Ip", raw: std("/v1/exports", "X-Real-Ip: 10.0.0.1"), want: forwarded},
		{name: "client Forwarded", raw: std("/v1/exports", `Forwarded: for=198.51.100.7;host=internal.example.com;proto=https`), want: forwarded},
		{name: "every forwarding header twice", raw: std("/v1/exports", "X-Forwarded-For: 1.1.1.1", "X-Forwarded-For: 2.2.2.2",
			"X-Forwarded-Host: a", "X-Forwarded-Host: b", "Forwarded: for=x", "Forwarded: for=y"), want: forwarded},
	}
}

// smuggled is a request that must never reach the application undecided.
const smuggled = "GET /v1/exports HTTP/1.1\r\nHost: app.example.com\r\nX-Tenant-ID: smuggled\r\n\r\n"

func framingAttacks() []attack {
	post := func(fields ...string) string {
		return rq("POST /v1/orders HTTP/1.1", append([]string{hostLine, tenantLine}, fields...)...)
	}
	chunkedSmuggle := "0\r\n\r\n" + smuggled
	return []attack{
		{name: "pipelined requests of one tenant", raw: std("/v1/exports") + std("/v1/exports"), want: forwarded},
		{name: "pipelined exempt then limited", raw: std("/healthz") + std("/v1/exports") + std("/v1/exports"), want: forwarded},
		{name: "request in a Content-Length body", raw: post(fmt.Sprintf("Content-Length: %d", len(smuggled))) + smuggled, want: forwarded},
		{name: "request in a GET body", raw: std("/healthz", fmt.Sprintf("Content-Length: %d", len(smuggled))) + smuggled, want: forwarded},
		{name: "request after Content-Length 0", raw: std("/healthz", "Content-Length: 0") + smuggled, want: forwarded},
		{name: "Transfer-Encoding and Content-Length", raw: post("Transfer-Encoding: chunked", fmt.Sprintf("Content-Length: %d", len(chunkedSmuggle))) + chunkedSmuggle, want: either},
		{name: "Content-Length and Transfer-Encoding", raw: post("Content-Length: 4", "Transfer-Encoding: chunked") + chunkedSmuggle, want: either},
		{name: "two different Content-Lengths", raw: post("Content-Length: 0", fmt.Sprintf("Content-Length: %d", len(smuggled))) + smuggled, want: refused},
		{name: "Content-Length list", raw: post(fmt.Sprintf("Content-Length: 0, %d", len(smuggled))) + smuggled, want: either},
		{name: "two equal Content-Lengths", raw: post("Content-Length: 2", "Content-Length: 2") + "{}", want: either},
		{name: "signed Content-Length", raw: post("Content-Length: +2") + "{}", want: either},
		{name: "Content-Length in spaces", raw: post("Content-Length:  2 ") + "{}", want: either},
		{name: "Transfer-Encoding in upper case", raw: post("Transfer-Encoding: CHUNKED") + "2\r\n{}\r\n" + chunkedSmuggle, want: either},
		{name: "Transfer-Encoding after a tab", raw: post("Transfer-Encoding:\tchunked") + "2\r\n{}\r\n" + chunkedSmuggle, want: either},
		{name: "Transfer-Encoding chunked twice", raw: post("Transfer-Encoding: chunked", "Transfer-Encoding: chunked") + chunkedSmuggle, want: either},
		{name: "Transfer-Encoding chunked then identity", raw: post("Transfer-Encoding: chunked", "Transfer-Encoding: identity") + chunkedSmuggle, want: either},
		{name: "Transfer-Encoding xchunked", raw: post("Transfer-Encoding: xchunked", fmt.Sprintf("Content-Length: %d", len(chunkedSmuggle))) + chunkedSmuggle, want: either},
		{name: "Transfer-Encoding gzip, chunked", raw: post("Transfer-Encoding: gzip, chunked") + chunkedSmuggle, want: either},
		{name: "chunk size with 0x", raw: post("Transfer-Encoding: chunked") + "0x2\r\n{}\r\n" + chunkedSmuggle, want: either},
		{name: "chunk extension", raw: post("Transfer-Encoding: chunked") + "2;a=b\r\n{}\r\n" + chunkedSmuggle, want: either},
		{name: "chunk lines ended by LF", raw: post("Transfer-Encoding: chunked") + "2\n{}\n0\n\n" + smuggled, want: either},
		{name: "chunked on HTTP/1.0", raw: rq("POST /v1/orders HTTP/1.0", hostLine, tenantLine, "Transfer-Encoding: chunked") + chunkedSmuggle, want: either},
		{name: "Expect 100-continue", raw: post("Expect: 100-continue", "Content-Length: 2") + "{}", want: forwarded},
		{name: "HTTP/1.0 keep-alive pipeline", raw: rq("GET /v1/exports HTTP/1.0", hostLine, tenantLine, "Connection: keep-alive") + std("/v1/exports"), want: forwarded},
	}
}

// TestAdversarialBeyondContract: ways around the limit that go beyond the
// request line and header rules, each modelled on a framework that routes
// the forwarded bytes differently from a plain router; the enforcer
// refuses or neutralises each. Routing by a query parameter (Phalcon's
// _url, Yii's r) is the application's own and docs/enforcer.md says so.
func TestAdversarialBeyondContract(t *testing.T) {
	methodOverride := func(v *appView, r *appRequest) { // Symfony, Laravel: POST with an override
		if v.method != http.MethodPost {
			return
		}
		for _, name := range []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"} {
			if vv := r.values(name); len(vv) > 0 {
				v.method = strings.ToUpper(vv[0])
			}
		}
		if _, q, ok := strings.Cut(r.target, "?"); ok {
			if m := queryValue(q, "_method"); m != "" {
				v.method = strings.ToUpper(m)
			}
		}
		if m := queryValue(string(r.body), "_method"); m != "" {
			v.method = strings.ToUpper(m)
		}
	}
	originalURL := func(v *appView, r *appRequest) { // Laminas/Zend, older Symfony (IIS rewrite headers)
		for _, name := range []string{"X-Original-Url", "X-Rewrite-Url"} {
			if vv := r.values(name); len(vv) > 0 {
				p, _, _ := strings.Cut(vv[0], "?")
				v.path = cleanLikeServeMux(p)
			}
		}
	}
	suffix := func(v *appView, r *appRequest) { // Rails formats, Spring suffix pattern matching
		dir, file := path.Split(v.path)
		if i := strings.LastIndexByte(file, '.'); i > 0 {
			v.path = dir + file[:i]
		}
	}
	unicodeFold := func(v *appView, r *appRequest) { // Java equalsIgnoreCase: 'ſ' is 's', 'K' (Kelvin) is 'k'
		v.path = strings.NewReplacer("ſ", "s", "\u212a", "k").Replace(v.path)
	}
	trailersMerged := func(v *appView, r *appRequest) { // servlet containers that merge trailers into headers
		r.fields = append(r.fields, r.trailers...)
	}
	unicodeStrip := func(v *appView, r *appRequest) { // a WSGI app calling .strip() on a latin-1 header
		for i, f := range r.fields {
			if cgiName(f.name) == "X-TENANT-ID" {
				r.fields[i].value = trimLatin1Space(f.value)
			}
		}
	}
	doubleDecode := func(v *appView, r *appRequest) { // a rewrite that decodes the path a second time
		if p, err := url.PathUnescape(v.path); err == nil {
			v.path = cleanLikeServeMux(p)
		}
	}
	h2c := rq("GET /healthz HTTP/1.1", hostLine, tenantLine, "Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA")
	chunkedTrailer := rq("POST /v1/orders HTTP/1.1", hostLine, "Transfer-Encoding: chunked", "Trailer: X-Tenant-ID") +
		"2\r\n{}\r\n0\r\nX-Tenant-ID: fresh\r\n\r\n"
	form := "_method=GET"
	attacks := []attack{
		{name: "X-HTTP-Method-Override GET on POST", raw: method("POST", "/v1/exports", "X-HTTP-Method-Override: GET", "Content-Length: 0"), want: either, quirk: methodOverride},
		{name: "X-HTTP-Method GET on POST", raw: method("POST", "/v1/exports", "X-HTTP-Method: GET", "Content-Length: 0"), want: either, quirk: methodOverride},
		{name: "_method=GET in the query of a POST", raw: method("POST", "/v1/exports?_method=GET", "Content-Length: 0"), want: either, quirk: methodOverride},
		{name: "_method=GET in a form body", raw: method("POST", "/v1/exports", "Content-Type: application/x-www-form-urlencoded",
			fmt.Sprintf("Content-Length: %d", len(form))) + form, want: either, quirk: methodOverride},
		{name: "X-Original-URL from an exempt path", raw: std("/healthz", "X-Original-URL: /v1/exports"), want: either, quirk: originalURL},
		{name: "X-Rewrite-URL from an exempt path", raw: std("/healthz", "X-Rewrite-URL: /v1/exports"), want: either, quirk: originalURL},
		{name: "format suffix", raw: std("/v1/exports.json"), want: either, quirk: suffix},
		{name: "format suffix on a partitioned path", raw: std("/v1/items/abc.json"), want: either, quirk: suffix},
		{name: "long s folds to s", raw: std("/v1/export%C5%BF"), want: either, quirk: unicodeFold},
		{name: "double-encoded path", raw: std("/v1/%2565xports"), want: either, quirk: doubleDecode},
		{name: "identity in a chunked trailer", raw: chunkedTrailer, want: either, quirk: trailersMerged},
		{name: "no-break space after the tenant", raw: bare("/v1/exports", "X-Tenant-ID: acme\xa0"), want: either, quirk: unicodeStrip},
		{name: "bearer scheme followed by a tab", raw: bare("/v1/exports", "Authorization: Bearer\t"+token("acme")), want: either},
		{name: "underscore X_Forwarded_Host", raw: std("/v1/exports", "X_Forwarded_Host: internal.example.com"), want: either},
		{name: "underscore X_Forwarded_For", raw: std("/v1/exports", "X_Forwarded_For: 198.51.100.7"), want: either},
		{name: "h2c upgrade tunnels requests past the enforcer", raw: h2c, then: std("/v1/exports") + std("/v1/exports"), want: either},
		{name: "h2c upgrade with HTTP2-Settings not in Connection", raw: rq("GET /healthz HTTP/1.1", hostLine, tenantLine, "Connection: Upgrade",
			"Upgrade: h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA"), then: std("/v1/exports") + std("/v1/exports"), want: either},
	}
	runAttacks(t, advPolicy, attacks)
}

// queryValue is the last value of key in an x-www-form-urlencoded string,
// as PHP's $_GET and $_POST keep it.
func queryValue(q, key string) string {
	vals, _ := url.ParseQuery(q)
	vv := vals[key]
	if len(vv) == 0 {
		return ""
	}
	return vv[len(vv)-1]
}

// TestAdversarialTrustedForwarding: from a trusted proxy the forwarding
// headers are kept and the peer appended; from any other peer, replaced.
func TestAdversarialTrustedForwarding(t *testing.T) {
	spec := func(trusted string) string {
		return `  identity: {sources: [{header: {name: X-Tenant-ID}}, {clientIP: {trustedProxies: [` + trusted + `]}}]}
  rules:
    - name: all
      algorithm: FixedWindow
      limits: [{requests: 100, period: 1m}]`
	}
	client := []string{"X-Forwarded-For: 198.51.100.7", "X-Forwarded-Host: shop.example.com", "X-Forwarded-Proto: https",
		"Forwarded: for=198.51.100.7;proto=https", "X-Real-Ip: 198.51.100.7"}
	cases := []struct {
		name, trusted string
		want          map[string][]string
	}{
		{"trusted peer keeps them", `"127.0.0.1/32"`, map[string][]string{
			"X-Forwarded-For": {"198.51.100.7, 127.0.0.1"}, "X-Forwarded-Host": {"shop.example.com"}, "X-Forwarded-Proto": {"https"},
			"Forwarded": {"for=198.51.100.7;proto=https"}, "X-Real-Ip": {"198.51.100.7"}}},
		{"untrusted peer gets the enforcer's", `"10.0.0.0/8"`, map[string][]string{
			"X-Forwarded-For": {"127.0.0.1"}, "X-Forwarded-Host": {"app.example.com"}, "X-Forwarded-Proto": {"http"},
			"Forwarded": nil, "X-Real-Ip": nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			app := newByteApp(t)
			e := start(t, setup{policies: policy("adv", spec(tc.trusted)), upstream: app.url})
			ex := exchange(t, e, attack{raw: std("/v1/orders", client...)})
			got := app.requests()
			t.Log(describe(ex, got))
			g.Expect(got).To(HaveLen(1))
			for name, want := range tc.want {
				g.Expect(got[0].values(name)).To(Equal(want), name)
			}
		})
	}
}

// trimLatin1Space trims spaces, tabs, and the no-break space and next-line
// characters in UTF-8 and in Latin-1, as Python's str.strip() does to a
// header decoded as Latin-1.
func trimLatin1Space(v string) string {
	for {
		was := v
		for _, cut := range []string{" ", "\t", "\u00a0", "\u0085", "\xa0", "\x85"} {
			v = strings.TrimSuffix(strings.TrimPrefix(v, cut), cut)
		}
		if v == was {
			return v
		}
	}
}
