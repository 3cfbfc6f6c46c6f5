package enforcer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/rawapp"
)

// answerRule is a FixedWindow rule of limit requests an hour per
// X-Tenant-ID over every path, with extra (JSON fields).
func answerRule(name string, limit int, extra string) string {
	return fmt.Sprintf(`{"name": %q, "match": {"paths": [{"prefix": "/"}]}, "algorithm": "FixedWindow", "cost": 1,
  "identity": {"sources": [{"header": {"name": "X-Tenant-ID"}}]}, "limits": [{"requests": %d, "period": "1h"}], %s}`, name, limit, extra)
}

const headerCost = `"responseCost": {"header": "X-Sluice-Cost"}`

// h2cApp is a cleartext HTTP/2 application serving handler.
func h2cApp(t *testing.T, handler http.HandlerFunc) string { return serveApp(t, handler, "H2C") }

// informational is a 1xx answer a client saw.
type informational struct {
	code   int
	header textproto.MIMEHeader
}

// sendTraced sends req with c, keeping the 1xx answers it gets, and reads
// the whole answer.
func sendTraced(t *testing.T, c *http.Client, req *http.Request) (tracedAnswer, string, []informational) {
	t.Helper()
	var got []informational
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		got = append(got, informational{code, h})
		return nil
	}}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return tracedAnswer{resp.StatusCode, resp.Header, resp.Trailer}, string(body), got
}

// tracedAnswer is what a client saw of an answer read to its end.
type tracedAnswer struct {
	StatusCode      int
	Header, Trailer http.Header
}

// TestEarlyHintsCarryNoCost: the application reports a cost of 50 on a
// 103 Early Hints and of 5 on its answer. The client gets the hints
// without the cost, over every way to the application, and 5 is charged.
func TestEarlyHintsCarryNoCost(t *testing.T) {
	http1 := func(t *testing.T) string {
		return rawapp.Serve(t, func(conn net.Conn, _ *rawapp.Request) bool {
			_, err := io.WriteString(conn, "HTTP/1.1 103 Early Hints\r\nLink: </app.css>; rel=preload\r\nX-Sluice-Cost: 50\r\n\r\n"+
				"HTTP/1.1 200 OK\r\nX-Sluice-Cost: 5\r\nContent-Length: 6\r\n\r\nanswer")
			return err == nil
		})
	}
	h2c := func(t *testing.T) string {
		return h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Link", "</app.css>; rel=preload")
			w.Header().Set("X-Sluice-Cost", "50")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Set("X-Sluice-Cost", "5")
			_, _ = io.WriteString(w, "answer")
		})
	}
	for _, tc := range []struct {
		name, protocol string
		app            func(*testing.T) string
		client         *http.Client
		grpc           bool // a gRPC call, which the transport forwards itself
	}{
		{"HTTP1", "HTTP1", http1, client, false},
		{"H2C", "H2C", h2c, client, false},
		{"H2C gRPC call", "H2C", h2c, h2cClient(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e := start(t, setup{config: grpcPolicy(namespace(t), tc.protocol, "Closed", "1s", answerRule("llm", 100, headerCost)),
				upstream: tc.app(t)})
			req, _ := http.NewRequest(http.MethodGet, e.url+"/v1/chat", nil)
			if tc.grpc {
				req, _ = http.NewRequest(http.MethodPost, e.url+"/llm.Chat/Complete", strings.NewReader("\x00\x00\x00\x00\x00"))
				req.Header.Set("Content-Type", "application/grpc")
				req.Header.Set("Te", "trailers")
			}
			req.Header.Set("X-Tenant-ID", "acme")
			resp, body, hints := sendTraced(t, tc.client, req)
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK), body)
			g.Expect(body).To(Equal("answer"))
			g.Expect(resp.Header).NotTo(HaveKey("X-Sluice-Cost"))
			g.Expect(hints).To(HaveLen(1), "the 103 reaches the client")
			g.Expect(hints[0].code).To(Equal(http.StatusEarlyHints))
			g.Expect(hints[0].header.Get("Link")).To(Equal("</app.css>; rel=preload"))
			g.Expect(hints[0].header).NotTo(HaveKey("X-Sluice-Cost"), "the cost reported on a 103 is the enforcer's")
			g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_response_charged_units_total", `rule="llm"`) }).
				WithTimeout(10*time.Second).Should(BeNumerically("==", 5), "the final answer's cost")
		})
	}
}

// TestUpgradeAnswerCarriesNoCost: the application reports a cost of 7 on
// the 101 that switches a WebSocket's connection: the client never sees
// it, and it is charged.
func TestUpgradeAnswerCarriesNoCost(t *testing.T) {
	for _, protocol := range []string{"HTTP1", "H2C"} {
		t.Run(protocol, func(t *testing.T) {
			g := NewWithT(t)
			app := rawapp.Serve(t, func(conn net.Conn, _ *rawapp.Request) bool {
				_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nX-Sluice-Cost: 7\r\n\r\n")
				return false // the tunnel ends at once
			})
			e := start(t, setup{config: grpcPolicy(namespace(t), protocol, "Closed", "1s", answerRule("llm", 100, headerCost)),
				upstream: app})
			conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
			g.Expect(err).NotTo(HaveOccurred())
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: api\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
				"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nX-Tenant-ID: acme\r\n\r\n")
			g.Expect(err).NotTo(HaveOccurred())
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusSwitchingProtocols))
			g.Expect(resp.Header.Get("Upgrade")).To(Equal("websocket"))
			g.Expect(resp.Header).NotTo(HaveKey("X-Sluice-Cost"))
			g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_response_charged_units_total", `rule="llm"`) }).
				WithTimeout(10*time.Second).Should(BeNumerically("==", 7), "the 101 is the answer: its cost is charged")
		})
	}
}

// TestReportedCostHeaderIsDecimalDigits: a reported cost is a whole number
// in decimal digits; a sign, a fraction, an exponent or a base is a
// malformed report, which charges the rule's cost alone.
func TestReportedCostHeaderIsDecimalDigits(t *testing.T) {
	g := NewWithT(t)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Sluice-Cost", r.URL.Query().Get("cost"))
		_, _ = io.WriteString(w, "answer")
	}))
	t.Cleanup(app.Close)
	e := start(t, setup{policies: answerSpec("FixedWindow", "responseCost: {header: X-Sluice-Cost}"), upstream: app.URL})
	tenant := uniqueTenant(t)
	reports := []string{"0x10p0", "+7", "1e3", "7.0", "0b11", "1_0"}
	for i, cost := range reports {
		g.Expect(get(t, e.url+"/v1/chat?cost="+url.QueryEscape(cost), tenant).status).To(Equal(http.StatusOK))
		g.Eventually(func() float64 {
			return metricValue(t, e, "sluice_enforcer_response_reports_invalid_total", `reason="malformed"`)
		}).WithTimeout(10*time.Second).Should(BeNumerically("==", i+1), "%q is malformed", cost)
	}
	g.Expect(metricValue(t, e, "sluice_enforcer_response_charged_units_total")).To(BeZero())
	g.Expect(get(t, e.url+"/v1/chat?cost=1", tenant).header.Get("X-RateLimit-Remaining")).To(Equal("3"),
		"10 less the rule's cost of each request")
}

// TestTrailerCostIsAskedForWhateverTheClient: an application that sends
// trailers only to a request that accepts them ("TE: trailers") reports
// its cost in one; a client that does not accept trailers is charged it
// all the same, and never sees it.
func TestTrailerCostIsAskedForWhateverTheClient(t *testing.T) {
	http1 := func(t *testing.T) string {
		return rawapp.Serve(t, func(conn net.Conn, sent *rawapp.Request) bool {
			answer := "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nanswer"
			if strings.Contains(strings.ToLower(sent.Req.Header.Get("Te")), "trailers") {
				answer = "HTTP/1.1 200 OK\r\nTrailer: X-Sluice-Cost\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nanswer\r\n0\r\nX-Sluice-Cost: 9\r\n\r\n"
			}
			_, err := io.WriteString(conn, answer)
			return err == nil
		})
	}
	h2c := func(t *testing.T) string {
		return h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
			trailers := r.Header.Get("Te") == "trailers"
			if trailers {
				w.Header().Set("Trailer", "X-Sluice-Cost")
			}
			_, _ = io.WriteString(w, "answer")
			if trailers {
				w.Header().Set("X-Sluice-Cost", "9")
			}
		})
	}
	for _, tc := range []struct {
		protocol string
		app      func(*testing.T) string
	}{{"HTTP1", http1}, {"H2C", h2c}} {
		t.Run(tc.protocol, func(t *testing.T) {
			g := NewWithT(t)
			e := start(t, setup{config: grpcPolicy(namespace(t), tc.protocol, "Closed", "1s", answerRule("llm", 100, headerCost)),
				upstream: tc.app(t)})
			req, _ := http.NewRequest(http.MethodGet, e.url+"/v1/chat", nil)
			req.Header.Set("X-Tenant-ID", "acme")
			resp, body, _ := sendTraced(t, client, req)
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
			g.Expect(body).To(Equal("answer"))
			g.Expect(resp.Header).NotTo(HaveKey("X-Sluice-Cost"))
			g.Expect(resp.Trailer).NotTo(HaveKey("X-Sluice-Cost"))
			g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_response_charged_units_total", `rule="llm"`) }).
				WithTimeout(10*time.Second).Should(BeNumerically("==", 9), "the cost in the trailer the enforcer asked for")
		})
	}
}

// TestDeclaredGRPCStatusTrailerDecides: a gRPC application sends
// grpc-status 0 with its headers, then 16 (UNAUTHENTICATED) in the trailer
// it declared. The client reads 16 alone, over HTTP/2 (the gRPC forwarder)
// as over HTTP/1.1 (the reverse proxy), and the login rule counts the call
// as the failure it is: it is not given back.
func TestDeclaredGRPCStatusTrailerDecides(t *testing.T) {
	app := func(t *testing.T) string {
		return h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			h := w.Header()
			h.Set("Content-Type", "application/grpc")
			h.Set("Grpc-Status", "0")
			h.Set("Trailer", "Grpc-Status")
			h.Set("X-Sluice-Cost", "3")
			_, _ = w.Write([]byte{0, 0, 0, 0, 0})
			h.Set("Grpc-Status", "16")
		})
	}
	for _, tc := range []struct {
		name   string
		client *http.Client
	}{{"HTTP2", h2cClient()}, {"HTTP1", client}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			// the cost rule's charge is recorded once the same answer's
			// refunds are settled: a sign that the login rule's is known
			e := start(t, setup{config: grpcPolicy(namespace(t), "H2C", "Closed", "1s",
				answerRule("login", 5, `"countResponses": {"grpcStatuses": [16]}`)+", "+answerRule("cost", 100, headerCost)), upstream: app(t)})
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, e.url+"/auth.Login/Check", strings.NewReader("\x00\x00\x00\x00\x00"))
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Te", "trailers")
			req.Header.Set("X-Tenant-ID", "acme")
			resp, _, _ := sendTraced(t, tc.client, req)
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
			g.Expect(resp.Trailer["Grpc-Status"]).To(Equal([]string{"16"}), "the trailer the application sent, alone")
			g.Eventually(func() float64 {
				return metricValue(t, e, "sluice_enforcer_response_charged_units_total", `rule="cost"`)
			}).
				WithTimeout(10 * time.Second).Should(BeNumerically("==", 3))
			g.Expect(metricValue(t, e, "sluice_enforcer_responses_uncounted_total")).To(BeZero(), "an UNAUTHENTICATED call counts")
		})
	}
}
