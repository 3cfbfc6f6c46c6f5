package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// grpcFixture is a Handler serving HTTP/1.1 and cleartext HTTP/2 in front
// of a grpc-go server, and a grpc-go client connected through it.
type grpcFixture struct {
	health healthpb.HealthClient
	url    string
}

func serveGRPC(t *testing.T, policies string, redis string) *grpcFixture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	app := grpc.NewServer()
	healthpb.RegisterHealthServer(app, health.NewServer())
	go func() { _ = app.Serve(ln) }()
	t.Cleanup(app.Stop)

	target, _ := url.Parse("http://" + ln.Addr().String())
	h := New(Options{Upstream: target})
	backends := engine.NewBackends(redis, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
	t.Cleanup(backends.Close)
	snap, err := engine.NewSnapshot(configOf(t, policies), backends)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Swap(snap); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)

	conn, err := grpc.NewClient(srv.Listener.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &grpcFixture{health: healthpb.NewHealthClient(conn), url: srv.URL}
}

// h2cPolicy is a policy forwarding as cleartext HTTP/2.
func h2cPolicy(name, failureMode, rules string) string {
	p := policyJSON(name, "Enforce", failureMode, "Both", rules)
	return p[:len(p)-1] + `, "upstreamProtocol": "H2C"}`
}

func TestGRPCCallRefusedWithRetryInfoAndQuotaFailure(t *testing.T) {
	g := NewWithT(t)
	f := serveGRPC(t, h2cPolicy("api", "Open", ruleJSON("calls", "{}", "FixedWindow", "2/1m")), redisURL)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "acme")

	for i := range 2 {
		var header metadata.MD
		resp, err := f.health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		g.Expect(err).NotTo(HaveOccurred(), "call %d", i)
		g.Expect(resp.GetStatus()).To(Equal(healthpb.HealthCheckResponse_SERVING))
		g.Expect(header.Get("x-ratelimit-limit")).To(ConsistOf("2"), "the limit headers are response metadata")
		g.Expect(header.Get("x-ratelimit-remaining")).To(ConsistOf([]string{"1", "0"}[i]))
	}

	// A refusal is trailers-only: its one header block is the call's
	// trailing metadata.
	var trailer metadata.MD
	_, err := f.health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	st, ok := status.FromError(err)
	g.Expect(ok).To(BeTrue(), "a gRPC status, not a transport error: %v", err)
	g.Expect(st.Code()).To(Equal(codes.ResourceExhausted))
	g.Expect(st.Message()).To(ContainSubstring("Rule calls of policy api allows 2 requests per 1m"))
	g.Expect(trailer.Get("x-ratelimit-remaining")).To(ConsistOf("0"))
	g.Expect(trailer.Get("retry-after")).To(HaveLen(1))

	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d
		case *errdetails.QuotaFailure:
			quota = d
		case *errdetails.ErrorInfo:
			info = d
		}
	}
	g.Expect(retry).NotTo(BeNil())
	g.Expect(retry.GetRetryDelay().AsDuration()).To(And(BeNumerically(">", 0), BeNumerically("<=", time.Minute)))
	g.Expect(quota).NotTo(BeNil())
	g.Expect(quota.GetViolations()).To(HaveLen(1))
	g.Expect(quota.GetViolations()[0].GetSubject()).To(Equal("policy/api/rule/calls"))
	g.Expect(info).NotTo(BeNil())
	g.Expect(info.GetReason()).To(Equal("RATE_LIMITED"))
	g.Expect(info.GetMetadata()).To(HaveKeyWithValue("rule", "calls"))

	// Another tenant has its own bucket.
	other := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "globex")
	_, err = f.health.Check(other, &healthpb.HealthCheckRequest{})
	g.Expect(err).NotTo(HaveOccurred())
}

func TestGRPCFailClosedIsUnavailable(t *testing.T) {
	g := NewWithT(t)
	// Nothing listens there: every decision fails, and the policy closes.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	dead := "redis://" + ln.Addr().String()
	_ = ln.Close()
	f := serveGRPC(t, h2cPolicy("api", "Closed", ruleJSON("calls", "{}", "TokenBucket", "100/1s")), dead)

	_, err = f.health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	st, _ := status.FromError(err)
	g.Expect(st.Code()).To(Equal(codes.Unavailable), "%v", err)
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	g.Expect(retry).NotTo(BeNil(), "fail-closed says when to retry")
}

func TestHTTP1ClientToH2CUpstream(t *testing.T) {
	g := NewWithT(t)
	f := serveGRPC(t, h2cPolicy("api", "Open", ruleJSON("calls", "{}", "FixedWindow", "100/1m")), redisURL)
	// A plain HTTP/1.1 request reaches the gRPC server over HTTP/2, which
	// answers it as gRPC servers answer what is not gRPC.
	resp, err := http.Post(f.url+"/grpc.health.v1.Health/Check", "text/plain", nil)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.ProtoMajor).To(Equal(1))
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnsupportedMediaType), "grpc-go's own answer, so the request went through")
	g.Expect(resp.Header.Get("X-RateLimit-Limit")).To(Equal("100"))
}

func TestEncodeGRPCMessage(t *testing.T) {
	for in, want := range map[string]string{
		"Retry in 3 s.": "Retry in 3 s.",
		"100% used":     "100%25 used",
		"línea\n":       "l%C3%ADnea%0A",
	} {
		if got := encodeGRPCMessage(in); got != want {
			t.Errorf("encodeGRPCMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGRPCCallsOutliveTheResponseHeaderTimeout: a server stream sends its
// headers with its first message, whenever that is; the response header
// timeout bounds other requests to the same H2C application, and a gRPC
// content type on HTTP/1.1.
func TestGRPCCallsOutliveTheResponseHeaderTimeout(t *testing.T) {
	g := NewWithT(t)
	app := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		w.Header().Set("Trailer", "Grpc-Status")
		_, _ = w.Write([]byte{0, 0, 0, 0, 0}) // one empty message
		http.NewResponseController(w).Flush() // streamed, as gRPC servers do: no Content-Length
		w.Header().Set("Grpc-Status", "0")
	}))
	app.Config.Protocols = new(http.Protocols)
	app.Config.Protocols.SetUnencryptedHTTP2(true)
	app.Start()
	t.Cleanup(app.Close)

	target, _ := url.Parse(app.URL)
	h := New(Options{Upstream: target, ResponseHeaderTimeout: 50 * time.Millisecond})
	backends := engine.NewBackends(redisURL, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
	t.Cleanup(backends.Close)
	snap, err := engine.NewSnapshot(configOf(t, h2cPolicy("api", "Open", ruleJSON("calls", "{}", "FixedWindow", "100/1m"))), backends)
	g.Expect(err).NotTo(HaveOccurred())
	if err := h.Swap(snap); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	h2 := &http.Transport{Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	clients := map[int]*http.Client{1: http.DefaultClient, 2: {Transport: h2}}

	// call returns the response with its body read and closed, and its
	// trailer filled in.
	call := func(proto int, contentType string) (status int, header, trailer http.Header) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/shop.v1.Orders/Watch", http.NoBody)
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Te", "trailers")
		resp, err := clients[proto].Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		g.Expect(resp.ProtoMajor).To(Equal(proto))
		return resp.StatusCode, resp.Header, resp.Trailer
	}
	status, _, trailer := call(2, "application/grpc")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(trailer.Get("Grpc-Status")).To(Equal("0"), "the application's trailers arrive")
	status, _, _ = call(2, "application/json")
	g.Expect(status).To(Equal(http.StatusGatewayTimeout))
	// gRPC runs on HTTP/2 only: its content type on HTTP/1.1 earns no
	// leeway (the answer is a gRPC status: UNAVAILABLE).
	_, header, _ := call(1, "application/grpc")
	g.Expect(header.Get("Grpc-Status")).To(Equal("14"))
}
