package enforcer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
)

// How a client ends the exchange must not decide what it is charged: the
// enforcer reads the application's answer on after the client has gone.

// budgetSpec is an LLM budget: 100,000 tokens an hour per X-Tenant-ID,
// 100 up front, the answer's usage.total_tokens when it ends.
func budgetSpec(extra string) string {
	return policy("llm", `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: llm
      algorithm: FixedWindow
      cost: 100
      limits: [{requests: 100000, period: 1h}]
      responseCost: {jsonUsage: total_tokens`+extra+`}`)
}

// streamingApp streams five content events, then, 300 ms later, the
// usage event of 900 tokens; with ?break=1 it breaks the stream off
// instead.
func streamingApp(t *testing.T) string {
	return serveApp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 5 {
			_, _ = fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"part %d\"}}],\"usage\":null}\n\n", i)
			w.(http.Flusher).Flush()
		}
		time.Sleep(300 * time.Millisecond)
		if r.URL.Query().Get("break") != "" {
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":800,\"total_tokens\":900}}\n\n")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
}

// abandon sends a streamed completion request, reads its first event and
// hangs up (HTTP/1.1: closes the connection; HTTP/2: resets the stream).
func abandon(t *testing.T, c *http.Client, url, tenant string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"stream":true,"stream_options":{"include_usage":true}}`))
	k, v, _ := strings.Cut(tenant, ": ")
	req.Header.Set(k, v)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.Contains(line, "part 0") {
		t.Fatalf("first event %q: %v", line, err)
	}
	_ = resp.Body.Close()
}

// TestAbandonedStreamIsChargedItsUsage: clients that read the content and
// hang up before the usage event, over HTTP/1.1 and HTTP/2, are charged
// the 900 tokens the application reported, as a client that reads it
// all is.
func TestAbandonedStreamIsChargedItsUsage(t *testing.T) {
	g := NewWithT(t)
	e := start(t, setup{policies: budgetSpec(""), upstream: streamingApp(t)})
	h1 := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	for _, c := range []*http.Client{h1, h2cClient()} {
		for range 3 {
			abandon(t, c, e.url+"/v1/chat/completions", uniqueTenant(t))
		}
	}
	g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_response_charged_units_total", `rule="llm"`) }).
		WithTimeout(10 * time.Second).Should(BeNumerically("==", 6*900))
	g.Expect(metricValue(t, e, "sluice_enforcer_response_reports_invalid_total")).To(BeZero())

	// what one tenant has left tells the same: 100,000 - 900
	tenant := uniqueTenant(t)
	abandon(t, h1, e.url+"/v1/chat/completions", tenant)
	g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_response_charged_units_total", `rule="llm"`) }).
		WithTimeout(10 * time.Second).Should(BeNumerically("==", 7*900))
	r := do(t, http.MethodPost, e.url+"/v1/chat/completions", tenant)
	g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal(fmt.Sprint(100000 - 900 - 100)))
}

// TestBrokenOffAnswerIsChargedTheUnfinishedCost: an answer broken off
// before its usage is charged the rule's unfinishedCost, not its cost.
func TestBrokenOffAnswerIsChargedTheUnfinishedCost(t *testing.T) {
	g := NewWithT(t)
	e := start(t, setup{policies: budgetSpec(", unfinishedCost: 4000"), upstream: streamingApp(t)})
	_, _ = tryDo(context.Background(), http.MethodPost, e.url+"/v1/chat/completions?break=1", uniqueTenant(t))
	g.Eventually(func() float64 {
		return metricValue(t, e, "sluice_enforcer_response_reports_invalid_total", `reason="unfinished"`)
	}).WithTimeout(10 * time.Second).Should(BeNumerically("==", 1))
	g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_response_charged_units_total", `rule="llm"`) }).
		WithTimeout(10 * time.Second).Should(BeNumerically("==", 4000))
}

// TestClientCannotPickAnUnreadableEncoding: a client asking for br gets
// an answer the enforcer can read, and is charged its usage; an
// application that answers br anyway is charged the unfinished cost.
func TestClientCannotPickAnUnreadableEncoding(t *testing.T) {
	g := NewWithT(t)
	var offered atomic.Value
	app := serveApp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		offered.Store(r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "br") || r.URL.Query().Get("force") != "" {
			w.Header().Set("Content-Encoding", "br")
			_, _ = w.Write([]byte{0x8b, 0x02, 0x80, 0x7b, 0x7d, 0x03}) // not readable without brotli
			return
		}
		_, _ = io.WriteString(w, `{"choices":[],"usage":{"total_tokens":900}}`)
	}))
	e := start(t, setup{policies: budgetSpec(", unfinishedCost: 3000"), upstream: app})

	r := do(t, http.MethodPost, e.url+"/v1/chat/completions", uniqueTenant(t), "Accept-Encoding: br")
	g.Expect(r.status).To(Equal(http.StatusOK))
	g.Expect(offered.Load()).To(Equal("identity"))
	g.Expect(r.body).To(ContainSubstring(`"total_tokens":900`))
	g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_response_charged_units_total", `rule="llm"`) }).
		WithTimeout(10 * time.Second).Should(BeNumerically("==", 900))

	r = do(t, http.MethodPost, e.url+"/v1/chat/completions", uniqueTenant(t), "Accept-Encoding: gzip;q=0.5, br")
	g.Expect(offered.Load()).To(Equal("gzip"))

	r = do(t, http.MethodPost, e.url+"/v1/chat/completions?force=1", uniqueTenant(t), "Accept-Encoding: br")
	g.Expect(r.header.Get("Content-Encoding")).To(Equal("br"))
	g.Eventually(func() float64 {
		return metricValue(t, e, "sluice_enforcer_response_reports_invalid_total", `reason="encoding"`)
	}).WithTimeout(10 * time.Second).Should(BeNumerically("==", 1))
	g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_response_charged_units_total", `rule="llm"`) }).
		WithTimeout(10 * time.Second).Should(BeNumerically("==", 900+900+3000))
}

// loginSpec counts a tenant's answers 401 to POST /login, 3 an hour.
const loginSpec = `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: login
      algorithm: FixedWindow
      match: {methods: [POST], paths: [{exact: /login}]}
      limits: [{requests: 3, period: 1h}]
      countResponses: {statuses: ["401"]}`

// TestLoginHangUpStillCounts: a client that hangs up before the
// application answers 401 (it checked the password) is counted: of six
// attempts, the application sees three, over HTTP/1.1 and HTTP/2.
func TestLoginHangUpStillCounts(t *testing.T) {
	var checked atomic.Int64
	app := serveApp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checked.Add(1)
		time.Sleep(400 * time.Millisecond)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	e := start(t, setup{policies: policy("login", loginSpec), upstream: app})
	h1 := &http.Client{Transport: &http.Transport{}}
	for name, c := range map[string]*http.Client{"HTTP/1.1": h1, "HTTP/2": h2cClient()} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			checked.Store(0)
			tenant := uniqueTenant(t)
			refused := 0
			for range 6 {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/login", nil)
				k, v, _ := strings.Cut(tenant, ": ")
				req.Header.Set(k, v)
				resp, err := c.Do(req)
				if err == nil {
					if resp.StatusCode == http.StatusTooManyRequests {
						refused++
					}
					_ = resp.Body.Close()
				}

				cancel()
			}
			time.Sleep(time.Second) // the application's last answers
			g.Expect(checked.Load()).To(BeNumerically("==", 3), "attempts that reached the application")
			g.Expect(refused).To(BeNumerically(">=", 1))
			g.Expect(do(t, http.MethodPost, e.url+"/login", tenant).status).To(Equal(http.StatusTooManyRequests))
			g.Expect(metricValue(t, e, "sluice_enforcer_responses_uncounted_total")).To(BeZero())
		})
	}
}

// slowLogin answers Check UNAUTHENTICATED after 400 ms.
type slowLogin struct {
	healthpb.UnimplementedHealthServer
	checked *atomic.Int64
}

func (s slowLogin) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	s.checked.Add(1)
	time.Sleep(400 * time.Millisecond)
	return nil, grpcstatus.Error(codes.Unauthenticated, "wrong password")
}

// TestGRPCLoginCancelStillCounts: a gRPC client that cancels its call
// before the application answers UNAUTHENTICATED is counted.
func TestGRPCLoginCancelStillCounts(t *testing.T) {
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	var checked atomic.Int64
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, slowLogin{checked: &checked})
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	e := start(t, setup{config: grpcPolicy(namespace(t), "H2C", "Closed", "1s",
		healthRule(`"countResponses": {"grpcStatuses": [16]}`)), upstream: "http://" + ln.Addr().String()})
	hc := healthpb.NewHealthClient(dialGRPC(t, e.url))
	tenant := strings.TrimPrefix(uniqueTenant(t), "X-Tenant-ID: ")
	exhausted := 0
	for range 13 {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-tenant-id", tenant), 100*time.Millisecond)
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if grpcstatus.Code(err) == codes.ResourceExhausted {
			exhausted++
		}
	}
	time.Sleep(time.Second)
	g.Expect(metricValue(t, e, "sluice_enforcer_responses_uncounted_total")).To(BeZero())
	g.Expect(checked.Load()).To(BeNumerically("==", 10), "calls that reached the application")
	g.Expect(exhausted).To(BeNumerically(">=", 1))
	_, err = hc.Check(metadata.AppendToOutgoingContext(context.Background(), "x-tenant-id", tenant), &healthpb.HealthCheckRequest{})
	g.Expect(grpcstatus.Code(err)).To(Equal(codes.ResourceExhausted))
}

// TestUpgradeCountsAs101: a rule counting 101 answers counts WebSocket
// handshakes: the third of a limit of two is refused.
func TestUpgradeCountsAs101(t *testing.T) {
	g := NewWithT(t)
	app := serveApp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
	}))
	e := start(t, setup{policies: policy("ws", `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: ws
      algorithm: FixedWindow
      limits: [{requests: 2, period: 1h}]
      countResponses: {statuses: ["101"]}`), upstream: app})
	addr := strings.TrimPrefix(e.url, "http://")
	tenant := uniqueTenant(t)
	handshake := func() string {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: api\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+tenant+"\r\n\r\n")
		g.Expect(err).NotTo(HaveOccurred())
		line, err := bufio.NewReader(conn).ReadString('\n')
		g.Expect(err).NotTo(HaveOccurred())
		return strings.TrimSpace(line)
	}
	g.Expect(handshake()).To(HavePrefix("HTTP/1.1 101"))
	g.Expect(handshake()).To(HavePrefix("HTTP/1.1 101"))
	g.Eventually(handshake).WithTimeout(5 * time.Second).Should(HavePrefix("HTTP/1.1 429"))
	g.Expect(metricValue(t, e, "sluice_enforcer_responses_uncounted_total")).To(BeZero())
}
