package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestGRPCCallOfABannedTenantIsResourceExhaustedUntilTheBanEnds(t *testing.T) {
	g := NewWithT(t)
	rule := ruleJSON("calls", "{}", "FixedWindow", "1/1m")
	rule = strings.TrimSuffix(rule, "}") + `, "ban": {"denials": 1, "within": "1m", "durations": ["1h"], "forgetAfter": "1h"}}`
	f := serveGRPC(t, h2cPolicy("api", "Open", rule), redisURL)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "mallory-"+time.Now().Format(time.RFC3339Nano))

	_, err := f.health.Check(ctx, &healthpb.HealthCheckRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	for i := range 2 { // the refusal that starts the ban, then the ban
		_, err = f.health.Check(ctx, &healthpb.HealthCheckRequest{})
		st, ok := status.FromError(err)
		g.Expect(ok).To(BeTrue(), "%v", err)
		g.Expect(st.Code()).To(Equal(codes.ResourceExhausted), "call %d", i)
		g.Expect(st.Message()).To(ContainSubstring("banned from the rule until"))
		var retry *errdetails.RetryInfo
		var info *errdetails.ErrorInfo
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				retry = d
			case *errdetails.ErrorInfo:
				info = d
			}
		}
		g.Expect(info.GetReason()).To(Equal("BANNED"))
		g.Expect(retry.GetRetryDelay().AsDuration()).To(BeNumerically("~", time.Hour, time.Minute), "until the ban ends")
	}
}
