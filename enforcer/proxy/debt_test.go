package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
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
)

// TestDebtHeaderShowsWhatTheAnswersOwe: an answer reports 15 of a rule of
// 10 per hour, so the tenant owes 5. Its next request is refused with
// X-RateLimit-Remaining 0 and X-RateLimit-Debt 5, and for the algorithms
// that pay back by the unit a Retry-After of the debt and the cost's
// emission intervals; another tenant sees no debt.
func TestDebtHeaderShowsWhatTheAnswersOwe(t *testing.T) {
	for _, algorithm := range []string{"FixedWindow", "TokenBucket", "GCRA", "SlidingWindowCounter"} {
		t.Run(algorithm, func(t *testing.T) {
			g := NewWithT(t)
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Sluice-Cost", r.URL.Query().Get("cost"))
				_, _ = io.WriteString(w, "answer")
			})
			u, rec := serveAnswers(t, answerRule(algorithm, 1, `"responseCost": {"header": "X-Sluice-Cost"}`), app)
			tenant := fmt.Sprintf("X-Tenant: debt-%d", time.Now().UnixNano())

			r := get(g, u+"/v1/chat?cost=15", tenant)
			g.Expect(r.status).To(Equal(http.StatusOK))
			g.Expect(r.header).NotTo(HaveKey("X-Ratelimit-Debt"), "the first request owed nothing when it was decided")
			g.Eventually(func() int64 { rec.amu.Lock(); defer rec.amu.Unlock(); return rec.charged }).WithTimeout(10 * time.Second).Should(BeNumerically("==", 15))

			r = get(g, u+"/v1/chat?cost=1", tenant)
			g.Expect(r.status).To(Equal(http.StatusTooManyRequests))
			g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
			g.Expect(r.header.Get("X-RateLimit-Debt")).To(Equal("5"), "15 charged of 10")
			g.Expect(r.header.Get("RateLimit")).To(ContainSubstring(";r=0;"), "the IETF field's remaining stays non-negative")
			retry, err := strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
			g.Expect(err).NotTo(HaveOccurred())
			if algorithm == "TokenBucket" || algorithm == "GCRA" {
				// one unit comes back every 6 minutes: the debt of 5 and the
				// request's 1 in 36 minutes
				g.Expect(retry).To(BeNumerically("~", 6*360, 5))
			} else {
				g.Expect(retry).To(BeNumerically(">", 0))
			}

			other := get(g, u+"/v1/chat?cost=1", fmt.Sprintf("X-Tenant: other-%d", time.Now().UnixNano()))
			g.Expect(other.status).To(Equal(http.StatusOK))
			g.Expect(other.header).NotTo(HaveKey("X-Ratelimit-Debt"))
		})
	}
}

// debtorHealth answers Check with a trailer reporting a cost of 15.
type debtorHealth struct {
	healthpb.UnimplementedHealthServer
}

func (debtorHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-sluice-cost", "15"))
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// TestGRPCRefusalCarriesTheDebt: a call reporting 15 of 10 leaves a debt
// of 5, which the next call's refusal carries in its metadata beside the
// other rate limit headers.
func TestGRPCRefusalCarriesTheDebt(t *testing.T) {
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	app := grpc.NewServer()
	healthpb.RegisterHealthServer(app, debtorHealth{})
	go func() { _ = app.Serve(ln) }()
	t.Cleanup(app.Stop)
	target, _ := url.Parse("http://" + ln.Addr().String())
	h := New(Options{Upstream: target})
	backends := engine.NewBackends(redisURL, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
	t.Cleanup(backends.Close)
	snap, err := engine.NewSnapshot(configOf(t, h2cPolicy("api", "Closed", answerRule("TokenBucket", 1, `"responseCost": {"header": "X-Sluice-Cost"}`))), backends)
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

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", fmt.Sprintf("grpc-debt-%d", time.Now().UnixNano()))
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		var header, trailer metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
		g.Expect(status.Code(err)).To(Equal(codes.ResourceExhausted))
		md := metadata.Join(header, trailer)
		g.Expect(md.Get("x-ratelimit-remaining")).To(Equal([]string{"0"}))
		g.Expect(md.Get("x-ratelimit-debt")).To(Equal([]string{"5"}), "rate limit metadata on the refusal: %v", md)
	}).WithTimeout(10 * time.Second).Should(Succeed())
}
