package enforcer

import (
	"context"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
)

// reportingHealth answers Check with the cost the caller asks it to
// report (metadata x-report) in trailer x-sluice-cost, and refuses a
// caller whose x-password is not "right" with UNAUTHENTICATED.
type reportingHealth struct {
	healthpb.UnimplementedHealthServer
}

func (reportingHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-report"); len(v) == 1 {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-sluice-cost", v[0]))
	}
	if v := md.Get("x-password"); len(v) == 1 && v[0] != "right" {
		return nil, grpcstatus.Error(codes.Unauthenticated, "wrong password")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func reportingApp(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, reportingHealth{})
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return "http://" + ln.Addr().String()
}

// healthRule is a rule of 10 an hour per x-tenant-id over Health/Check,
// with extra (JSON fields).
func healthRule(extra string) string {
	return `{"name": "check", "match": {"paths": [{"exact": "/grpc.health.v1.Health/Check"}]}, "algorithm": "TokenBucket", "cost": 1,
  "identity": {"sources": [{"header": {"name": "X-Tenant-ID"}}]}, "limits": [{"requests": 10, "period": "1h"}], ` + extra + `}`
}

// TestGRPCTrailerCostThroughTheEnforcer: a gRPC application reports a
// call's cost in a trailer; the client never sees it, and the tenant's
// next call waits for the debt.
func TestGRPCTrailerCostThroughTheEnforcer(t *testing.T) {
	g := NewWithT(t)
	e := start(t, setup{config: grpcPolicy(namespace(t), "H2C", "Closed", "1s",
		healthRule(`"responseCost": {"header": "X-Sluice-Cost"}`)), upstream: reportingApp(t)})
	client := healthpb.NewHealthClient(dialGRPC(t, e.url))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant-id", "acme", "x-report", "14")

	var header, trailer metadata.MD
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(trailer).NotTo(HaveKey("x-sluice-cost"))
	g.Expect(header).NotTo(HaveKey("x-sluice-cost"))
	g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_response_charged_units_total") }).
		WithTimeout(10 * time.Second).Should(BeNumerically("==", 14))
	// 14 of 10: 4 tokens of debt, then 1 for the call: 5 tokens, 30 minutes
	g.Eventually(func(g Gomega) {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		g.Expect(grpcstatus.Code(err)).To(Equal(codes.ResourceExhausted))
		g.Expect(refusalOf(err).retryDelay).To(BeNumerically("~", 30*time.Minute, time.Minute))
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

// TestGRPCLoginCountsUnauthenticatedOnly: calls that succeed are given
// back; UNAUTHENTICATED ones count.
func TestGRPCLoginCountsUnauthenticatedOnly(t *testing.T) {
	g := NewWithT(t)
	e := start(t, setup{config: grpcPolicy(namespace(t), "H2C", "Closed", "1s",
		healthRule(`"countResponses": {"grpcStatuses": [16]}`)), upstream: reportingApp(t)})
	client := healthpb.NewHealthClient(dialGRPC(t, e.url))
	right := metadata.AppendToOutgoingContext(context.Background(), "x-tenant-id", "acme", "x-password", "right")
	wrong := metadata.AppendToOutgoingContext(context.Background(), "x-tenant-id", "acme", "x-password", "wrong")
	for i := range 15 {
		_, err := client.Check(right, &healthpb.HealthCheckRequest{})
		g.Expect(err).NotTo(HaveOccurred(), "successful call %d", i)
		g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_responses_uncounted_total") }).
			WithTimeout(10 * time.Second).Should(BeNumerically("==", i+1))
	}
	for i := range 10 {
		_, err := client.Check(wrong, &healthpb.HealthCheckRequest{})
		g.Expect(grpcstatus.Code(err)).To(Equal(codes.Unauthenticated), "failed call %d", i)
	}
	_, err := client.Check(right, &healthpb.HealthCheckRequest{})
	g.Expect(grpcstatus.Code(err)).To(Equal(codes.ResourceExhausted))
}
