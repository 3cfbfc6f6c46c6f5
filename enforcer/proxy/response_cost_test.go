package proxy

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rules"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// answerRecording counts what answers charged, beside what recording counts.
type answerRecording struct {
	*recording
	amu       sync.Mutex
	charged   int64
	invalid   map[string]int
	uncounted int
}

func (r *answerRecording) ResponseCharged(_ *rules.Policy, _ *rules.Rule, units int64) {
	r.amu.Lock()
	defer r.amu.Unlock()
	r.charged += units
}

func (r *answerRecording) ResponseReportInvalid(_ *rules.Policy, _ *rules.Rule, reason string) {
	r.amu.Lock()
	defer r.amu.Unlock()
	r.invalid[reason]++
}

func (r *answerRecording) ResponseUncounted(*rules.Policy, *rules.Rule) {
	r.amu.Lock()
	defer r.amu.Unlock()
	r.uncounted++
}

func (r *answerRecording) invalidReports(reason string) int {
	r.amu.Lock()
	defer r.amu.Unlock()
	return r.invalid[reason]
}

// serveAnswers is serve with a recorder of what answers charged.
func serveAnswers(t *testing.T, rule string, app http.Handler) (string, *answerRecording) {
	t.Helper()
	upstream := httptest.NewServer(app)
	t.Cleanup(upstream.Close)
	target, _ := url.Parse(upstream.URL)
	rec := &answerRecording{recording: &recording{checks: map[string]int{}, policies: map[string]int{}}, invalid: map[string]int{}}
	h := New(Options{Upstream: target, Recorder: rec})
	backends := engine.NewBackends(redisURL, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
	t.Cleanup(backends.Close)
	snap, err := engine.NewSnapshot(configOf(t, policyJSON("api", "Enforce", "Closed", "Both", rule)), backends)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Swap(snap); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, rec
}

// answerRule is a rule of 10 per hour for each X-Tenant, with extra (the
// responseCost or countResponses field, JSON) and the given cost.
func answerRule(algorithm string, cost int, extra string) string {
	return fmt.Sprintf(`{"name": "llm", "match": {}, "algorithm": %q, "cost": %d,
  "identity": {"sources": [{"header": {"name": "X-Tenant"}}]}, "limits": [{"requests": 10, "period": "1h"}], %s}`,
		algorithm, cost, extra)
}

func TestResponseHeaderCostIsChargedAndStripped(t *testing.T) {
	for _, algorithm := range []string{"FixedWindow", "TokenBucket", "GCRA", "SlidingWindowCounter"} {
		t.Run(algorithm, func(t *testing.T) {
			g := NewWithT(t)
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Sluice-Cost", "15")
				_, _ = io.WriteString(w, "answer")
			})
			u, rec := serveAnswers(t, answerRule(algorithm, 1, `"responseCost": {"header": "X-Sluice-Cost"}`), app)

			r := get(g, u+"/v1/chat", "X-Tenant: acme")
			g.Expect(r.status).To(Equal(200))
			g.Expect(r.body).To(Equal("answer"))
			g.Expect(r.header).NotTo(HaveKey("X-Sluice-Cost"), "the reported cost is the enforcer's, not the client's")
			g.Eventually(func() int64 { rec.amu.Lock(); defer rec.amu.Unlock(); return rec.charged }).WithTimeout(10 * time.Second).Should(BeNumerically("==", 15))
			// 15 of 10 charged: the tenant is in debt, its next request waits
			g.Eventually(func(g Gomega) {
				r := get(g, u+"/v1/chat", "X-Tenant: acme")
				g.Expect(r.status).To(Equal(http.StatusTooManyRequests))
				g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
				g.Expect(r.header.Get("Retry-After")).NotTo(BeEmpty())
			}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
			// another tenant is not in debt
			g.Expect(get(g, u+"/v1/chat", "X-Tenant: other").status).To(Equal(200))
		})
	}
}

func TestResponseCostTrailerIsChargedAndStripped(t *testing.T) {
	g := NewWithT(t)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sluice-Cost")
		_, _ = io.WriteString(w, "answer")
		w.Header().Set("X-Sluice-Cost", "12")
	})
	u, _ := serveAnswers(t, answerRule("FixedWindow", 1, `"responseCost": {"header": "X-Sluice-Cost"}`), app)
	req, _ := http.NewRequest(http.MethodGet, u+"/v1/chat", nil)
	req.Header.Set("X-Tenant", "acme")
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(200))
	g.Expect(resp.Trailer).NotTo(HaveKey("X-Sluice-Cost"))
	g.Expect(resp.Header.Get("Trailer")).To(BeEmpty())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, u+"/v1/chat", "X-Tenant: acme").status).To(Equal(http.StatusTooManyRequests))
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
}

func TestMissingOrMalformedReportChargesOnlyTheCost(t *testing.T) {
	for reason, value := range map[string]string{"missing": "", "malformed": "lots", "negative": "-3"} {
		t.Run(reason, func(t *testing.T) {
			g := NewWithT(t)
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if value != "" {
					w.Header().Set("X-Sluice-Cost", value)
				}
				_, _ = io.WriteString(w, "answer")
			})
			u, rec := serveAnswers(t, answerRule("FixedWindow", 2, `"responseCost": {"header": "X-Sluice-Cost"}`), app)
			for i := range 5 {
				r := get(g, u+"/v1/chat", "X-Tenant: acme")
				g.Expect(r.status).To(Equal(200), "request %d of cost 2 in 10", i)
				g.Expect(r.header).NotTo(HaveKey("X-Sluice-Cost"))
			}
			g.Eventually(rec.invalidReports).WithArguments(reason).WithTimeout(10 * time.Second).Should(Equal(5))
			r := get(g, u+"/v1/chat", "X-Tenant: acme")
			g.Expect(r.status).To(Equal(http.StatusTooManyRequests), "5 requests of cost 2 used the 10")
		})
	}
}

// usageEvent is one chunk of an OpenAI-compatible stream.
func usageEvent(content string) string {
	return fmt.Sprintf("data: {\"choices\":[{\"delta\":{\"content\":%q}}],\"usage\":null}\n\n", content)
}

func TestStreamedUsageIsChargedWithoutHoldingTheStream(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, usageEvent("Hel"))
		w.(http.Flusher).Flush()
		<-release // the rest of the answer waits for the client to see the first event
		_, _ = io.WriteString(w, usageEvent("lo"))
		_, _ = io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":5,"total_tokens":9}}`+"\n\n")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
	u, rec := serveAnswers(t, answerRule("TokenBucket", 1, `"responseCost": {"jsonUsage": "total_tokens"}`), app)

	req, _ := http.NewRequest(http.MethodPost, u+"/v1/chat/completions", strings.NewReader(`{"stream":true}`))
	req.Header.Set("X-Tenant", "acme")
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	lines := bufio.NewReader(resp.Body)
	first, err := lines.ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first).To(ContainSubstring("Hel"), "the first event reaches the client while the application still writes")
	close(release)
	rest, err := io.ReadAll(lines)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(string(rest)).To(HaveSuffix("data: [DONE]\n\n"))
	g.Eventually(func() int64 { rec.amu.Lock(); defer rec.amu.Unlock(); return rec.charged }).WithTimeout(10 * time.Second).Should(BeNumerically("==", 9))
	// 9 of 10 used (recorded once Redis has it): the next request takes the last token
	r := get(g, u+"/v1/models", "X-Tenant: acme")
	g.Expect(r.status).To(Equal(200))
	g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
}

func TestGzipJSONUsageIsCharged(t *testing.T) {
	g := NewWithT(t)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, `{"id":"c1","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`)
		_ = zw.Close()
	})
	u, rec := serveAnswers(t, answerRule("FixedWindow", 1, `"responseCost": {"jsonUsage": "total_tokens"}`), app)
	r := get(g, u+"/v1/chat/completions", "X-Tenant: acme", "Accept-Encoding: gzip")
	g.Expect(r.status).To(Equal(200))
	g.Eventually(func() int64 { rec.amu.Lock(); defer rec.amu.Unlock(); return rec.charged }).WithTimeout(10 * time.Second).Should(BeNumerically("==", 6))
	// 6 charged (recorded once Redis has it), then 1 up front: 3 left
	g.Expect(get(g, u+"/v1/models", "X-Tenant: acme").header.Get("X-RateLimit-Remaining")).To(Equal("3"))
}

func TestLoginRuleCountsFailuresOnly(t *testing.T) {
	g := NewWithT(t)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Password") != "right" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	})
	u, rec := serveAnswers(t, answerRule("SlidingWindowCounter", 1, `"countResponses": {"statuses": ["401", "403", "5xx"]}`), app)
	// successes never use up the limit: each is given back
	for i := range 25 {
		r := get(g, u+"/login", "X-Tenant: acme", "X-Password: right")
		g.Expect(r.status).To(Equal(200), "successful login %d", i)
		g.Eventually(func() int { rec.amu.Lock(); defer rec.amu.Unlock(); return rec.uncounted }).WithTimeout(10 * time.Second).Should(Equal(i + 1))
	}
	// failures count: 10 of them, then the tenant is refused, even with the right password
	for i := range 10 {
		g.Expect(get(g, u+"/login", "X-Tenant: acme", "X-Password: wrong").status).To(Equal(http.StatusUnauthorized), "failure %d", i)
	}
	g.Expect(get(g, u+"/login", "X-Tenant: acme", "X-Password: right").status).To(Equal(http.StatusTooManyRequests))
}

// costlyHealth answers Check with a trailer reporting its cost.
type costlyHealth struct {
	healthpb.UnimplementedHealthServer
}

func (costlyHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-sluice-cost", "10"))
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func TestGRPCTrailerCostIsChargedAndStripped(t *testing.T) {
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	app := grpc.NewServer()
	healthpb.RegisterHealthServer(app, costlyHealth{})
	go func() { _ = app.Serve(ln) }()
	t.Cleanup(app.Stop)
	target, _ := url.Parse("http://" + ln.Addr().String())
	h := New(Options{Upstream: target})
	backends := engine.NewBackends(redisURL, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
	t.Cleanup(backends.Close)
	snap, err := engine.NewSnapshot(configOf(t, h2cPolicy("api", "Closed", answerRule("FixedWindow", 1, `"responseCost": {"header": "X-Sluice-Cost"}`))), backends)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.Swap(snap)).To(Succeed())
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	conn, err := grpc.NewClient(srv.Listener.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = conn.Close() })
	client := healthpb.NewHealthClient(conn)

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "acme")
	var header, trailer metadata.MD
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(trailer).NotTo(HaveKey("x-sluice-cost"))
	g.Expect(header).NotTo(HaveKey("x-sluice-cost"))
	g.Expect(trailer.Get("grpc-status")).To(BeEmpty()) // grpc-go takes it, and the call succeeded
	// 10 of 10 charged: the next call is refused
	g.Eventually(func() codes.Code {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		return status.Code(err)
	}).WithTimeout(10 * time.Second).Should(Equal(codes.ResourceExhausted))
}

func TestReportedCostIsStrippedWhenRedisIsDown(t *testing.T) {
	g := NewWithT(t)
	down := redistest.Start(t)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Sluice-Cost", "3")
		_, _ = io.WriteString(w, "answer")
	}))
	t.Cleanup(app.Close)
	f := serveTo(t, configOf(t, policyJSON("api", "Enforce", "Open", "Both",
		answerRule("FixedWindow", 1, `"responseCost": {"header": "X-Sluice-Cost"}`))), down.URL(), app.URL)
	down.Stop()
	r := get(g, f.url+"/v1/chat", "X-Tenant: acme")
	g.Expect(r.status).To(Equal(200), "fail open")
	g.Expect(r.header).NotTo(HaveKey("X-Sluice-Cost"), "the failure mode decided, and the reported cost is still the enforcer's")
}

func TestLoginRuleRefusalsAfterTheLastFailureCountTowardTheBan(t *testing.T) {
	g := NewWithT(t)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Password") != "right" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	})
	rule := `{"name": "login", "match": {}, "algorithm": "FixedWindow", "cost": 1,
  "identity": {"sources": [{"header": {"name": "X-Tenant"}}]}, "limits": [{"requests": 2, "period": "1h"}],
  "countResponses": {"statuses": ["401"]},
  "ban": {"denials": 2, "within": "1m", "durations": ["1h"], "forgetAfter": "1h"}}`
	u, _ := serveAnswers(t, rule, app)
	for range 2 {
		g.Expect(get(g, u+"/login", "X-Tenant: mallory", "X-Password: wrong").status).To(Equal(http.StatusUnauthorized))
	}
	// two refusals after the last allowed failure: the ban starts
	for range 2 {
		g.Expect(get(g, u+"/login", "X-Tenant: mallory", "X-Password: wrong").status).To(Equal(http.StatusTooManyRequests))
	}
	r := get(g, u+"/login", "X-Tenant: mallory", "X-Password: right")
	g.Expect(r.status).To(Equal(http.StatusTooManyRequests))
	g.Expect(r.body).To(ContainSubstring("banned"))
}

// TestHeaderCostIsDecimalDigits: a cost reported in a header is decimal
// digits; anything else a number parser might take is malformed.
func TestHeaderCostIsDecimalDigits(t *testing.T) {
	for v, want := range map[string]struct {
		units  int64
		reason string
	}{
		"42": {42, ""}, "007": {7, ""}, " 3\t": {3, ""}, "0": {0, ""},
		"-2": {0, engine.ReportNegative},
		"+7": {0, engine.ReportMalformed}, "1e3": {0, engine.ReportMalformed}, "0x10p0": {0, engine.ReportMalformed},
		"12.0": {0, engine.ReportMalformed}, "0x10": {0, engine.ReportMalformed}, "1_000": {0, engine.ReportMalformed},
		"": {0, engine.ReportMalformed}, "-": {0, engine.ReportMalformed}, "99999999999999999999": {0, engine.ReportMalformed},
		"Inf": {0, engine.ReportMalformed}, "\u00a012": {0, engine.ReportMalformed},
	} {
		units, reason := headerUnits(v)
		if units != want.units || reason != want.reason {
			t.Errorf("headerUnits(%q) = %d, %q; want %d, %q", v, units, reason, want.units, want.reason)
		}
	}
}
