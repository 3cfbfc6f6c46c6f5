package e2e

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/example/orders"
	"github.com/sluice-dev/sluice/internal/testing/stack"
)

// The gRPC sample: config/samples/ratelimitpolicy_grpc.yaml in front of two
// replicas of hack/orders, as a user would apply it.
var _ = Describe("A gRPC application", Ordered, func() {
	const namespace = "e2e-grpc"
	var (
		eps     []stack.Endpoint
		clients []*orders.Client
	)
	BeforeAll(func(ctx SpecContext) {
		data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "ratelimitpolicy_grpc.yaml"))
		Expect(err).NotTo(HaveOccurred())
		policies, err := stack.ParsePolicies(data)
		Expect(err).NotTo(HaveOccurred())
		Expect(policies).To(HaveLen(1))
		Expect(sluice.CreateNamespace(ctx, namespace)).To(Succeed())
		Expect(sluice.CreatePolicies(ctx, namespace, policies...)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(apimeta.IsStatusConditionTrue(policy(ctx, namespace, "orders").Status.Conditions, v1alpha1.ConditionAccepted)).To(BeTrue())
		}).Should(Succeed())
		labels := policies[0].Spec.Selector.MatchLabels
		for i := range 2 {
			Expect(sluice.Client.Create(ctx, stack.OrdersPod(namespace, fmt.Sprintf("orders-%d", i), labels, policies[0].Spec.UpstreamPort))).To(Succeed())
		}
		eps, err = sluice.WaitReady(ctx, namespace, "orders-0", "orders-1")
		Expect(err).NotTo(HaveOccurred())
		expectConfigLoaded(ctx, namespace, eps)
		for _, ep := range eps {
			cc, err := grpc.NewClient(strings.TrimPrefix(ep.HTTP, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(cc.Close)
			clients = append(clients, orders.NewClient(cc))
			// The application starts beside the enforcer; its health
			// service answers through the enforcer once it serves.
			health := healthpb.NewHealthClient(cc)
			Eventually(func(g Gomega) {
				resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: orders.ServiceName})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(resp.GetStatus()).To(Equal(healthpb.HealthCheckResponse_SERVING))
			}).Should(Succeed(), "%s serves through its enforcer", ep.Pod)
		}
	})

	It("shares a tenant's Create limit between the replicas and refuses with RetryInfo", func(ctx SpecContext) {
		acme := metadata.AppendToOutgoingContext(ctx, "x-tenant-id", "acme")
		var allowed, refused int
		var refusal error
		pods := map[string]bool{}
		for i := range 16 {
			var header metadata.MD
			out, err := clients[i%2].Create(acme, "book", grpc.Header(&header))
			switch status.Code(err) {
			case grpccodes.OK:
				allowed++
				Expect(out).To(Equal("created book"))
				pods[strings.Join(header.Get(orders.PodHeader), "")] = true
			case grpccodes.ResourceExhausted:
				refused++
				refusal = err
			default:
				Fail(fmt.Sprintf("call %d: %v", i, err))
			}
		}
		// 10 a minute in a token bucket: a call's worth may refill while
		// the 16 calls are made.
		Expect(allowed).To(BeNumerically(">=", 10))
		Expect(allowed).To(BeNumerically("<=", 11))
		Expect(refused).To(Equal(16 - allowed))
		Expect(pods).To(HaveLen(2), "both replicas answered from the one bucket")

		st := status.Convert(refusal)
		Expect(st.Message()).To(And(ContainSubstring("orders"), ContainSubstring("create")))
		var retry *errdetails.RetryInfo
		var quota *errdetails.QuotaFailure
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				retry = d
			case *errdetails.QuotaFailure:
				quota = d
			}
		}
		Expect(retry).NotTo(BeNil(), "RetryInfo: %v", st.Details())
		Expect(retry.GetRetryDelay().AsDuration()).To(And(BeNumerically(">", 0), BeNumerically("<=", 6*time.Second)), "one token every 6s")
		Expect(quota.GetViolations()).To(HaveLen(1))
		Expect(quota.GetViolations()[0].GetSubject()).To(ContainSubstring("create"))

		_, err := clients[0].Create(metadata.AppendToOutgoingContext(ctx, "x-tenant-id", "globex"), "pen")
		Expect(err).NotTo(HaveOccurred(), "another tenant has its own budget")
	})

	It("passes streams both ways, counted by the service's rule", func(ctx SpecContext) {
		tenant := metadata.AppendToOutgoingContext(ctx, "x-tenant-id", "initech")
		chat, err := clients[1].Chat(tenant)
		Expect(err).NotTo(HaveOccurred())
		for _, line := range []string{"one", "two", "three"} {
			Expect(chat.Send(wrapperspb.String(line))).To(Succeed())
			m, err := chat.Recv()
			Expect(err).NotTo(HaveOccurred())
			Expect(m.GetValue()).To(Equal("echo: " + line))
		}
		Expect(chat.CloseSend()).To(Succeed())
		_, err = chat.Recv()
		Expect(err).To(MatchError(io.EOF))
		header, err := chat.Header()
		Expect(err).NotTo(HaveOccurred())
		Expect(header.Get("ratelimit-policy")).To(ContainElement(ContainSubstring(`"orders/orders";q=600;w=60`)))
	})

	It("reports the calls in the policy's status", func(ctx SpecContext) {
		expectReady(ctx, namespace, "orders", 2)
		Eventually(func(g Gomega) {
			d := policy(ctx, namespace, "orders").Status.Decisions
			g.Expect(d.Denied).To(BeNumerically(">=", 5))
			g.Expect(d.Allowed).To(BeNumerically(">=", 12))
		}).Should(Succeed())
	})
})
