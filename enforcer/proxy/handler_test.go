package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/overload"
	"github.com/sluice-dev/sluice/enforcer/rules"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// policyJSON is one compiled policy whose rules are given as JSON.
func policyJSON(name, mode, failureMode, headers, rules string) string {
	return fmt.Sprintf(`{"name": %q, "uid": "uid-%s", "generation": 1, "selector": {}, "replicas": 1,
  "upstreamPort": 8080, "mode": %q, "failureMode": %q, "timeout": "1s", "responseHeaders": %q,
  "salt": "salt-%s", "rules": [%s]}`, name, name, mode, failureMode, headers, name, rules)
}

// ruleJSON is a rule over every request, shared by all clients, with the
// given algorithm and limits ("requests/period" pairs).
func ruleJSON(name, match, algorithm string, limits ...string) string {
	var ls []string
	for _, l := range limits {
		n, period, _ := strings.Cut(l, "/")
		ls = append(ls, fmt.Sprintf(`{"requests": %s, "period": %q}`, n, period))
	}
	return fmt.Sprintf(`{"name": %q, "match": %s, "algorithm": %q, "cost": 1,
  "identity": {"sources": [{"header": {"name": "X-Tenant"}}, {"shared": {}}]}, "limits": [%s]}`,
		name, match, algorithm, strings.Join(ls, ", "))
}

func configOf(t testing.TB, policies ...string) *config.Config {
	t.Helper()
	// Every test gets namespace of its own, so buckets never collide.
	ns := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"schema": %q, "namespace": %q, "policies": [%s]}`,
		config.Schema, ns, strings.Join(policies, ", "))))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// recording counts what a Handler reports.
type recording struct {
	engine.NopRecorder
	mu       sync.Mutex
	checks   map[string]int // "policy/rule/tier/verdict"
	policies map[string]int // "policy/verdict"
	degraded int
	upstream int
	refused  map[string]int // by reason
}

func (r *recording) Check(p *rules.Policy, rule *rules.Rule, tier string, v engine.Verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks[p.Name+"/"+rule.Name+"/"+tier+"/"+v.String()]++
}

func (r *recording) Policy(p *rules.Policy, v engine.Verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.policies[p.Name+"/"+v.String()]++
}

func (r *recording) Degraded(*rules.Policy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.degraded++
}

func (r *recording) Refused(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refused == nil {
		r.refused = map[string]int{}
	}
	r.refused[reason]++
}

func (r *recording) refusals(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused[reason]
}

func (r *recording) UpstreamError() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.upstream++
}

type fixture struct {
	url      string
	rec      *recording
	handler  *Handler
	backends *engine.Backends
}

// serve runs a Handler for cfg, deciding with Redis at redisURL, in front
// of upstream (an "ok" application when nil).
func serve(t *testing.T, cfg *config.Config, redisURL string, upstream http.Handler) *fixture {
	t.Helper()
	if upstream == nil {
		upstream = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	}
	app := httptest.NewServer(upstream)
	t.Cleanup(app.Close)
	return serveTo(t, cfg, redisURL, app.URL)
}

// serveTo is a Handler in front of the application at appURL.
func serveTo(t *testing.T, cfg *config.Config, redisURL, appURL string) *fixture {
	t.Helper()
	target, _ := url.Parse(appURL)
	rec := &recording{checks: map[string]int{}, policies: map[string]int{}}
	h := New(Options{Upstream: target, Recorder: rec})
	backends := engine.NewBackends(redisURL, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
	t.Cleanup(backends.Close)
	snap, err := engine.NewSnapshot(cfg, backends)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Swap(snap); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{url: srv.URL, rec: rec, handler: h, backends: backends}
}

type response struct {
	status int
	header http.Header
	body   string
}

func get(g Gomega, url string, headers ...string) response {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	g.Expect(err).NotTo(HaveOccurred())
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return response{resp.StatusCode, resp.Header, string(body)}
}

var redisURL string

func TestMain(m *testing.M) {
	os.Exit(redistest.RunWithServer(m, func(s *redistest.Server) { redisURL = s.URL() }))
}

func TestAllowedThenRefused(t *testing.T) {
	g := NewWithT(t)
	f := serve(t, configOf(t, policyJSON("api", "Enforce", "Open", "Both", ruleJSON("all", "{}", "FixedWindow", "2/1h"))), redisURL, nil)

	for want := 1; want >= 0; want-- {
		r := get(g, f.url+"/x")
		g.Expect(r.status).To(Equal(200))
		g.Expect(r.body).To(Equal("ok"))
		g.Expect(r.header.Get("X-RateLimit-Limit")).To(Equal("2"))
		g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal(fmt.Sprint(want)))
		g.Expect(r.header.Get("RateLimit-Policy")).To(Equal(`"api/all";q=2;w=3600`))
		g.Expect(r.header.Get("RateLimit")).To(MatchRegexp(`^"api/all";r=%d;t=\d+$`, want))
	}
	r := get(g, f.url+"/x")
	g.Expect(r.status).To(Equal(http.StatusTooManyRequests))
	g.Expect(r.header.Get("Content-Type")).To(Equal("application/problem+json"))
	g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
	var p Problem
	g.Expect(json.Unmarshal([]byte(r.body), &p)).To(Succeed())
	g.Expect(p.Type).To(Equal(ProblemRateLimited))
	g.Expect(p.Policy).To(Equal("api"))
	g.Expect(p.Rule).To(Equal("all"))
	g.Expect(r.header.Get("Retry-After")).To(Equal(fmt.Sprint(p.RetryAfter)))
	g.Expect(p.RetryAfter).To(BeNumerically(">", 0))
	g.Expect(p.RetryAfter).To(BeNumerically("<=", 3600))

	// Another tenant has a budget of its own.
	g.Expect(get(g, f.url+"/x", "X-Tenant: other").status).To(Equal(200))
	g.Expect(f.rec.checks).To(Equal(map[string]int{"api/all//allowed": 3, "api/all//denied": 1}))
	g.Expect(f.rec.policies).To(Equal(map[string]int{"api/allowed": 3, "api/denied": 1}))
}

// TestRefusedRequestCountsNowhere: a request refused by one rule gives back
// what the other rules took, across policies.
func TestRefusedRequestCountsNowhere(t *testing.T) {
	g := NewWithT(t)
	f := serve(t, configOf(t,
		policyJSON("wide", "Enforce", "Open", "XRateLimit", ruleJSON("all", "{}", "TokenBucket", "10/1h")),
		policyJSON("narrow", "Enforce", "Open", "None", ruleJSON("exports", `{"paths": [{"prefix": "/exports"}]}`, "SlidingWindowLog", "1/1h")),
	), redisURL, nil)
	g.Expect(get(g, f.url+"/exports").status).To(Equal(200))
	for range 3 {
		r := get(g, f.url+"/exports")
		g.Expect(r.status).To(Equal(429))
		g.Expect(r.body).To(ContainSubstring(`"policy":"narrow"`))
	}
	// Only the admitted request took a token from the wide bucket.
	g.Expect(get(g, f.url+"/other").header.Get("X-RateLimit-Remaining")).To(Equal("8"))
}

// TestRefusalReportsWhatTheRefundLeft: the headers of a refused request
// give the other rules' remaining after their refund, what the next
// request finds, not what the refused one had taken.
func TestRefusalReportsWhatTheRefundLeft(t *testing.T) {
	g := NewWithT(t)
	f := serve(t, configOf(t,
		policyJSON("wide", "Enforce", "Open", "IETF", ruleJSON("all", "{}", "FixedWindow", "100/1h")),
		policyJSON("narrow", "Enforce", "Open", "None", ruleJSON("exports", `{"paths": [{"prefix": "/exports"}]}`, "FixedWindow", "1/1h")),
	), redisURL, nil)
	g.Expect(get(g, f.url+"/exports").header.Get("RateLimit")).To(HavePrefix(`"wide/all";r=99;`))
	r := get(g, f.url+"/exports")
	g.Expect(r.status).To(Equal(429))
	g.Expect(r.header.Get("RateLimit")).To(HavePrefix(`"wide/all";r=99;`))
	g.Expect(get(g, f.url+"/other").header.Get("RateLimit")).To(HavePrefix(`"wide/all";r=98;`))
}

func TestDryRunNeverRefuses(t *testing.T) {
	g := NewWithT(t)
	f := serve(t, configOf(t, policyJSON("shadow", "DryRun", "Open", "Both", ruleJSON("all", "{}", "SlidingWindowCounter", "1/1h"))), redisURL, nil)
	g.Expect(get(g, f.url).header.Get("X-Sluice-Would-Deny")).To(BeEmpty())
	for range 2 {
		r := get(g, f.url)
		g.Expect(r.status).To(Equal(200))
		g.Expect(r.header.Get("X-Sluice-Would-Deny")).To(Equal("shadow/all"))
		g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
	}
	g.Expect(f.rec.policies).To(Equal(map[string]int{"shadow/allowed": 1, "shadow/would_deny": 2}))
}

// TestOpenAndClosedFailureModes: with Redis gone, an Open policy forwards
// and a Closed one answers 503. LocalFallback is tested in the limiter
// (guard_test.go) and against the built binary (test/enforcer).
func TestOpenAndClosedFailureModes(t *testing.T) {
	g := NewWithT(t)
	down := redistest.Start(t)
	f := serve(t, configOf(t,
		policyJSON("open", "Enforce", "Open", "Both", ruleJSON("all", "{}", "FixedWindow", "100/1m")),
		policyJSON("closed", "Enforce", "Closed", "Both", ruleJSON("admin", `{"paths": [{"prefix": "/admin"}]}`, "FixedWindow", "100/1m")),
	), down.URL(), nil)
	g.Expect(get(g, f.url+"/admin").status).To(Equal(200))
	down.Stop()

	start := time.Now()
	r := get(g, f.url+"/public")
	g.Expect(r.status).To(Equal(200), "fail open")
	g.Expect(r.header.Get("X-RateLimit-Remaining")).To(BeEmpty(), "no headers guessed")
	g.Expect(r.header.Get("RateLimit")).To(BeEmpty())

	r = get(g, f.url+"/admin")
	g.Expect(r.status).To(Equal(http.StatusServiceUnavailable), "fail closed")
	g.Expect(r.header.Get("Retry-After")).To(Equal("1"))
	g.Expect(r.body).To(ContainSubstring(ProblemLimiterUnavailable))
	g.Expect(time.Since(start)).To(BeNumerically("<", time.Second), "bounded by the policies' timeout")
	g.Expect(f.rec.degraded).To(BeNumerically(">=", 3))
}

func TestUpstreamUnavailable(t *testing.T) {
	g := NewWithT(t)
	f := serve(t, configOf(t, policyJSON("api", "Enforce", "Open", "Both", ruleJSON("all", "{}", "FixedWindow", "100/1m"))), redisURL, nil)
	// Point the proxy at a port nothing listens on.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	target, _ := url.Parse(dead.URL)
	h := New(Options{Upstream: target, Recorder: f.rec})
	if err := h.Swap(f.handler.Snapshot()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	r := get(g, srv.URL)
	g.Expect(r.status).To(Equal(http.StatusBadGateway))
	g.Expect(r.header.Get("Content-Type")).To(Equal("application/problem+json"))
	g.Expect(r.body).To(ContainSubstring(ProblemUpstreamUnavailable))
	g.Expect(r.header.Get("X-RateLimit-Limit")).To(Equal("100"), "the decision is still described")
	g.Expect(f.rec.upstream).To(Equal(1))
}

func TestNotConfiguredYet(t *testing.T) {
	g := NewWithT(t)
	target, _ := url.Parse("http://127.0.0.1:1")
	w := httptest.NewRecorder()
	New(Options{Upstream: target}).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	g.Expect(w.Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(w.Header().Get("Retry-After")).To(Equal("1"))
}

// TestClientHangUpIsNotARedisFailure: requests whose clients are gone
// before the decision must not make the guard believe Redis is down.
func TestClientHangUpIsNotARedisFailure(t *testing.T) {
	g := NewWithT(t)
	f := serve(t, configOf(t, policyJSON("api", "Enforce", "Closed", "Both", ruleJSON("all", "{}", "FixedWindow", "100/1m"))), redisURL, nil)
	h := f.handler
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil).WithContext(ctx))
	}
	r := get(g, f.url)
	g.Expect(r.status).To(Equal(200), r.body)
	g.Expect(f.backends.All()[0].Guard.Health().Reachable).To(BeTrue())
}

// TestAmbiguousRequestRefusedBeforeAnyRule: a request the application could
// read otherwise than the limiter gets a bad-request problem, is counted
// by reason, takes nothing from any bucket and never reaches the
// application.
func TestAmbiguousRequestRefusedBeforeAnyRule(t *testing.T) {
	g := NewWithT(t)
	var reached atomic.Int32
	f := serve(t, configOf(t, policyJSON("api", "Enforce", "Open", "Both", ruleJSON("all", "{}", "FixedWindow", "2/1h"))), redisURL,
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))

	r := get(g, f.url+"/v1%2Fexports")
	g.Expect(r.status).To(Equal(http.StatusBadRequest))
	g.Expect(r.header.Get("Content-Type")).To(Equal("application/problem+json"))
	g.Expect(r.header.Get("X-RateLimit-Limit")).To(BeEmpty(), "no rule was asked")
	var p Problem
	g.Expect(json.Unmarshal([]byte(r.body), &p)).To(Succeed())
	g.Expect(p.Type).To(Equal(ProblemBadRequest))
	g.Expect(p.Detail).To(ContainSubstring("encoded slash"))
	g.Expect(f.rec.refusals("target")).To(Equal(1))
	g.Expect(f.rec.checks).To(BeEmpty())
	g.Expect(reached.Load()).To(BeZero())

	g.Expect(get(g, f.url+"/v1/exports").header.Get("X-RateLimit-Remaining")).To(Equal("1"), "the refusal took nothing")
}

// TestBrokenBodyIsNeverAnsweredOK: a body whose framing breaks, or that
// ends early, gets a 400 problem: answering nothing would have net/http
// send 200 on the enforcer's behalf.
func TestBrokenBodyIsNeverAnsweredOK(t *testing.T) {
	// The application reads the whole body before it answers.
	f := serve(t, configOf(t, allowAll(t)), redisURL, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err == nil {
			_, _ = io.WriteString(w, "ok")
		}
	}))
	for name, raw := range map[string]string{
		"bad chunk size":      "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\nzz\r\n",
		"short known length":  "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc",
		"short streamed body": "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\nabc",
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			conn, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
			g.Expect(err).NotTo(HaveOccurred())
			defer conn.Close()
			_, _ = io.WriteString(conn, raw)
			_ = conn.(*net.TCPConn).CloseWrite() // the body ends here
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
			g.Expect(resp.Header.Get("Content-Type")).To(Equal("application/problem+json"))
		})
	}
}

func TestOverloadedAnswer(t *testing.T) {
	g := NewWithT(t)
	h := New(Options{Overload: overload.New(overload.Limits{MaxInFlight: 0, MaxInFlightPerTenant: 1})})
	g.Expect(h.Swap(&engine.Snapshot{})).To(Succeed())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	g.Expect(rec.Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(rec.Header().Get("Retry-After")).To(Equal("1"))
	g.Expect(rec.Header().Get("Content-Type")).To(Equal("application/problem+json"))
	g.Expect(rec.Header().Get("Connection")).To(Equal("close"))
	g.Expect(rec.Body.String()).To(ContainSubstring(ProblemOverloaded))

	grpc := httptest.NewRequest(http.MethodPost, "/shop.v1.Orders/Create", nil)
	grpc.ProtoMajor, grpc.Header["Content-Type"] = 2, []string{"application/grpc"}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, grpc)
	g.Expect(rec.Header().Get("Grpc-Status")).To(Equal("14"), "UNAVAILABLE")
}

// TestTwoUpstreamProtocolsAreRefused: a configuration whose policies would
// forward with two protocols is refused, and the one in service stays.
func TestTwoUpstreamProtocolsAreRefused(t *testing.T) {
	g := NewWithT(t)
	rule := ruleJSON("all", "{}", "FixedWindow", "100/1m")
	f := serve(t, configOf(t, policyJSON("web", "Enforce", "Open", "Both", rule)), redisURL, nil)
	before := f.handler.Snapshot()
	mixed := configOf(t, policyJSON("web", "Enforce", "Open", "Both", rule), h2cPolicy("grpc", "Open", rule))
	_, err := UpstreamProtocol(mixed)
	g.Expect(err).To(MatchError(ContainSubstring("policies web and grpc select this pod with different upstreamProtocol (HTTP1, H2C)")))
	snap, err := engine.NewSnapshot(mixed, f.backends)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.handler.Swap(snap)).To(MatchError(ContainSubstring("different upstreamProtocol")))
	g.Expect(f.handler.Snapshot()).To(BeIdenticalTo(before), "the configuration in service stays")
	g.Expect(get(g, f.url).status).To(Equal(http.StatusOK))

	// A policy of the rate limit service forwards nothing: it has no say.
	withDomain := configOf(t, h2cPolicy("grpc", "Open", rule))
	withDomain.Policies = append(withDomain.Policies, config.Policy{Name: "ingress", Domain: "ingress"})
	g.Expect(UpstreamProtocol(withDomain)).To(Equal(config.UpstreamH2C))
}
