package proxy

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestGRPCStreamHoldsItsConcurrencySlotAndAnOtherCallIsResourceExhausted(t *testing.T) {
	g := NewWithT(t)
	rule := `{"name": "calls", "match": {}, "algorithm": "Concurrency", "cost": 1,
  "identity": {"sources": [{"header": {"name": "X-Tenant"}}, {"shared": {}}]}, "limits": [{"concurrent": 1}]}`
	f := serveGRPC(t, h2cPolicy("api", "Open", rule), redisURL)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "streamer-"+time.Now().Format(time.RFC3339Nano))

	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	watch, err := f.health.Watch(watchCtx, &healthpb.HealthCheckRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = watch.Recv() // the stream is open, through the enforcer
	g.Expect(err).NotTo(HaveOccurred())

	_, err = f.health.Check(ctx, &healthpb.HealthCheckRequest{})
	st, ok := status.FromError(err)
	g.Expect(ok).To(BeTrue(), "%v", err)
	g.Expect(st.Code()).To(Equal(codes.ResourceExhausted), "the stream holds the tenant's one slot")
	g.Expect(st.Message()).To(ContainSubstring("allows 1 requests in flight at once"))
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if d, ok := d.(*errdetails.ErrorInfo); ok {
			info = d
		}
	}
	g.Expect(info.GetReason()).To(Equal("RATE_LIMITED"))

	stopWatching()
	g.Eventually(func() error {
		_, err := f.health.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}, 10*time.Second, 20*time.Millisecond).Should(Succeed(), "the stream's end gave its slot back")
}
