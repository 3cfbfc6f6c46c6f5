//go:build node

package node

import (
	"context"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/internal/example/orders"
)

// grpcCreates makes n shop.v1.Orders/Create calls to addr as tenant, on
// one connection as a gRPC client does, and returns each call's code.
func grpcCreates(ctx context.Context, addr, tenant string, n int) []string {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer cc.Close()
	// The Service routes to the pod a moment after it turns Ready: wait
	// on the health service, which the policy exempts.
	health := healthpb.NewHealthClient(cc)
	EventuallyWithOffset(1, func(g Gomega) {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := health.Check(callCtx, &healthpb.HealthCheckRequest{Service: orders.ServiceName})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.GetStatus()).To(Equal(healthpb.HealthCheckResponse_SERVING))
	}).Should(Succeed())
	c := orders.NewClient(cc)
	ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant-id", tenant)
	var out []string
	for range n {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.Create(callCtx, "book")
		cancel()
		out = append(out, status.Code(err).String())
	}
	return out
}
