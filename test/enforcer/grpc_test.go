package enforcer

import (
	"context"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-dev/sluice/internal/example/orders"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

const createPath = `[{"exact": "/shop.v1.Orders/Create"}]`

// TestGRPCUnaryRefusedWithRetryInfo calls Create through the enforcer
// until the tenant's limit is reached: the allowed calls carry the rate
// limit headers as header metadata, the refused one is RESOURCE_EXHAUSTED
// with RetryInfo and QuotaFailure as a grpc-go client reads them, never
// reaches the application, and another tenant is not affected.
func TestGRPCUnaryRefusedWithRetryInfo(t *testing.T) {
	g := NewWithT(t)
	app, svc := ordersApp(t, nil)
	e := start(t, setup{config: grpcPolicy(namespace(t), "H2C", "Open", "1s", tenantRule("create", createPath, 2)), upstream: app})
	c := orders.NewClient(dialGRPC(t, e.url))
	acme := metadata.AppendToOutgoingContext(context.Background(), "x-tenant-id", "acme")

	for i := range 2 {
		var header, trailer metadata.MD
		out, err := c.Create(acme, "book", grpc.Header(&header), grpc.Trailer(&trailer))
		g.Expect(err).NotTo(HaveOccurred(), "call %d", i+1)
		g.Expect(out).To(Equal("created book"))
		g.Expect(header.Get("x-ratelimit-limit")).To(Equal([]string{"2"}))
		g.Expect(header.Get("x-ratelimit-remaining")).To(Equal([]string{strconv.Itoa(1 - i)}))
		g.Expect(header.Get("ratelimit-policy")).To(Equal([]string{`"orders/create";q=2;w=3600`}))
		g.Expect(header.Get(orders.PodHeader)).To(Equal([]string{"orders-0"}), "the application's header metadata")
		g.Expect(trailer.Get(orders.ServedTrailer)).To(Equal([]string{strconv.Itoa(i + 1)}), "the application's trailers")
	}

	var header, trailer metadata.MD
	_, err := c.Create(acme, "book", grpc.Header(&header), grpc.Trailer(&trailer))
	st, ok := grpcstatus.FromError(err)
	g.Expect(ok).To(BeTrue(), "a gRPC status, not a transport error: %v", err)
	g.Expect(st.Code()).To(Equal(codes.ResourceExhausted), "%v", err)
	g.Expect(st.Message()).To(And(ContainSubstring("orders"), ContainSubstring("create")))
	r := refusalOf(err)
	g.Expect(r.hasRetry).To(BeTrue(), "RetryInfo in grpc-status-details-bin: %v", st.Details())
	g.Expect(r.retryDelay).To(And(BeNumerically(">", 0), BeNumerically("<=", time.Hour)))
	g.Expect(r.violations).To(HaveLen(1), "one QuotaFailure violation: %v", st.Details())
	g.Expect(r.violations[0].GetSubject()).To(And(ContainSubstring("orders"), ContainSubstring("create")))
	g.Expect(r.errorInfo.GetReason()).To(Equal("RATE_LIMITED"), "ErrorInfo tells a limit from other refusals")
	g.Expect(r.errorInfo.GetMetadata()).To(And(HaveKeyWithValue("policy", "orders"), HaveKeyWithValue("rule", "create")))
	// A refusal is trailers-only: grpc-go hands its metadata out as trailer.
	md := metadata.Join(header, trailer)
	g.Expect(md.Get("x-ratelimit-remaining")).To(Equal([]string{"0"}), "rate limit metadata on the refusal: %v", md)
	g.Expect(md.Get("x-ratelimit-limit")).To(Equal([]string{"2"}))
	g.Expect(md.Get("retry-after")).NotTo(BeEmpty())
	g.Expect(svc.Served()).To(Equal(int64(2)), "the refused call never reached the application")

	out, err := c.Create(metadata.AppendToOutgoingContext(context.Background(), "x-tenant-id", "globex"), "pen")
	g.Expect(err).NotTo(HaveOccurred(), "another tenant has a budget of its own")
	g.Expect(out).To(Equal("created pen"))
}

// TestGRPCStreams passes each kind of stream through the enforcer with
// messages both ways and the application's trailers intact; a stream is one
// request for the limiter, whatever its number of messages.
func TestGRPCStreams(t *testing.T) {
	g := NewWithT(t)
	app, _ := ordersApp(t, nil)
	e := start(t, setup{config: grpcPolicy(namespace(t), "H2C", "Open", "1s",
		tenantRule("orders", `[{"prefix": "/shop.v1.Orders"}]`, 100)), upstream: app})
	c := orders.NewClient(dialGRPC(t, e.url))
	ctx, cancel := within(10 * time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant-id", "acme")

	remaining := func() int {
		var header metadata.MD
		_, err := c.Create(ctx, "book", grpc.Header(&header))
		g.Expect(err).NotTo(HaveOccurred())
		n, err := strconv.Atoi(header.Get("x-ratelimit-remaining")[0])
		g.Expect(err).NotTo(HaveOccurred(), "x-ratelimit-remaining: %v", header)
		return n
	}
	before := remaining()

	watch, err := c.Watch(ctx, 3)
	g.Expect(err).NotTo(HaveOccurred())
	var updates []string
	for {
		m, err := watch.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		g.Expect(err).NotTo(HaveOccurred())
		updates = append(updates, m.GetValue())
	}
	g.Expect(updates).To(Equal([]string{"update 1", "update 2", "update 3"}), "server streaming")
	g.Expect(watch.Trailer().Get(orders.ServedTrailer)).NotTo(BeEmpty(), "trailers after a stream")

	upload, err := c.Upload(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for i := range 5 {
		g.Expect(upload.Send(wrapperspb.String("item " + strconv.Itoa(i)))).To(Succeed())
	}
	n, err := upload.CloseAndRecv()
	g.Expect(err).NotTo(HaveOccurred(), "client streaming")
	g.Expect(n.GetValue()).To(Equal(int64(5)))

	chat, err := c.Chat(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, line := range []string{"hello", "how many?", "bye"} {
		g.Expect(chat.Send(wrapperspb.String(line))).To(Succeed())
		m, err := chat.Recv()
		g.Expect(err).NotTo(HaveOccurred(), "bidirectional streaming")
		g.Expect(m.GetValue()).To(Equal("echo: " + line))
	}
	g.Expect(chat.CloseSend()).To(Succeed())
	_, err = chat.Recv()
	g.Expect(err).To(MatchError(io.EOF), "the stream ends with the application's OK status")
	g.Expect(chat.Trailer().Get(orders.ServedTrailer)).NotTo(BeEmpty())

	// Three streams, one request each, then this call.
	g.Expect(remaining()).To(Equal(before-4), "each stream counted once")
}

// TestGRPCCancelReachesApplication cancels an endless server stream, then
// a unary call in progress, on the client: the application sees each call
// cancelled.
func TestGRPCCancelReachesApplication(t *testing.T) {
	g := NewWithT(t)
	calls := make(chan orders.Call, 4)
	app, svc := ordersApp(t, calls)
	e := start(t, setup{config: grpcPolicy(namespace(t), "H2C", "Open", "1s",
		tenantRule("orders", `[{"prefix": "/shop.v1.Orders"}]`, 100)), upstream: app})
	c := orders.NewClient(dialGRPC(t, e.url))

	ctx, cancel := context.WithCancel(context.Background())
	watch, err := c.Watch(ctx, 0)
	g.Expect(err).NotTo(HaveOccurred())
	for range 2 {
		_, err := watch.Recv()
		g.Expect(err).NotTo(HaveOccurred())
	}
	cancel()
	_, err = watch.Recv()
	g.Expect(grpcstatus.Code(err)).To(Equal(codes.Canceled))
	var call orders.Call
	g.Eventually(calls, 10*time.Second).Should(Receive(&call), "the application's stream ended")
	g.Expect(call.Method).To(Equal(orders.WatchMethod))
	g.Expect(call.Err).To(MatchError(context.Canceled), "the client's cancel reached the application")

	// A unary call the application is still working on, cancelled by the
	// client once the application has it.
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Create(ctx, orders.WaitItem)
		done <- err
	}()
	g.Eventually(func() int64 { return svc.Served() }, 10*time.Second, 10*time.Millisecond).Should(Equal(int64(2)))
	cancel()
	g.Eventually(done, 10*time.Second).Should(Receive(WithTransform(grpcstatus.Code, Equal(codes.Canceled))))
	g.Eventually(calls, 10*time.Second).Should(Receive(&call))
	g.Expect(call.Method).To(Equal(orders.CreateMethod))
	g.Expect(call.Err).To(MatchError(context.Canceled), "a unary call's cancel reached the application")
}

// TestGRPCDeadlinePropagates calls with a deadline: the application's call
// has it (grpc-timeout passed on), and ends when it passes.
func TestGRPCDeadlinePropagates(t *testing.T) {
	g := NewWithT(t)
	calls := make(chan orders.Call, 4)
	app, _ := ordersApp(t, calls)
	e := start(t, setup{config: grpcPolicy(namespace(t), "H2C", "Open", "1s",
		tenantRule("create", createPath, 100)), upstream: app})
	c := orders.NewClient(dialGRPC(t, e.url))

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_, err := c.Create(ctx, orders.WaitItem)
	g.Expect(grpcstatus.Code(err)).To(Equal(codes.DeadlineExceeded), "%v", err)
	var call orders.Call
	g.Eventually(calls, 10*time.Second).Should(Receive(&call))
	g.Expect(call.Deadline).NotTo(BeZero(), "the application's call has a deadline")
	// grpc-timeout is relative and rounded up to its unit: allow a little.
	g.Expect(call.Deadline).To(BeTemporally("<=", deadline.Add(100*time.Millisecond)), "no later than the client's")
	g.Expect(call.Err).To(Or(MatchError(context.DeadlineExceeded), MatchError(context.Canceled)), "the call ended with the deadline")
}

// TestGRPCFailClosed stops answering from Redis under a fail-closed policy:
// calls are UNAVAILABLE with RetryInfo, answered once the policy's timeout
// has passed rather than at the client's deadline.
func TestGRPCFailClosed(t *testing.T) {
	g := NewWithT(t)
	srv := redistest.Start(t)
	app, svc := ordersApp(t, nil)
	e := start(t, setup{config: grpcPolicy(namespace(t), "H2C", "Closed", "100ms",
		tenantRule("create", createPath, 1000)), upstream: app, redisURL: srv.URL()})
	c := orders.NewClient(dialGRPC(t, e.url))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant-id", "acme")
	_, err := c.Create(ctx, "book")
	g.Expect(err).NotTo(HaveOccurred())

	for _, fault := range []struct {
		name       string
		cause, fix func()
	}{
		{"frozen", srv.Freeze, srv.Thaw},
		{"stopped", srv.Stop, func() { g.Expect(srv.Restart()).To(Succeed()) }},
	} {
		fault.cause()
		time.Sleep(leaseGrace) // a held lease serves until it ends
		served := svc.Served()
		// The client would wait 5s; the policy waits 100ms. The slack is a
		// busy machine's, as in TestRedisOutageUnderLoad.
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		begin := time.Now()
		_, err := c.Create(callCtx, "book")
		took := time.Since(begin)
		cancel()
		fault.fix()
		st, _ := grpcstatus.FromError(err)
		g.Expect(st.Code()).To(Equal(codes.Unavailable), "%s: %v", fault.name, err)
		g.Expect(refusalOf(err).hasRetry).To(BeTrue(), "%s: RetryInfo: %v", fault.name, st.Details())
		g.Expect(took).To(BeNumerically("<", 100*time.Millisecond+900*time.Millisecond), fault.name)
		g.Expect(svc.Served()).To(Equal(served), "%s: nothing reaches the application undecided", fault.name)
		g.Eventually(func() error { _, err := c.Create(ctx, "book"); return err }, 5*time.Second, 50*time.Millisecond).
			Should(Succeed(), "%s: Redis back", fault.name)
	}
}

// TestGRPCMalformedCallAnswered sends a call the enforcer refuses for its
// form (the tenant header twice, with different values): the client gets
// a gRPC status saying so, not a broken HTTP answer.
func TestGRPCMalformedCallAnswered(t *testing.T) {
	g := NewWithT(t)
	app, svc := ordersApp(t, nil)
	e := start(t, setup{config: grpcPolicy(namespace(t), "H2C", "Open", "1s", tenantRule("create", createPath, 100)), upstream: app})
	c := orders.NewClient(dialGRPC(t, e.url))
	ctx, cancel := within(10 * time.Second)
	defer cancel()
	_, err := c.Create(metadata.AppendToOutgoingContext(ctx, "x-tenant-id", "acme", "x-tenant-id", "globex"), "book")
	g.Expect(grpcstatus.Code(err)).To(BeElementOf(codes.InvalidArgument, codes.Internal), "%v", err)
	g.Expect(svc.Served()).To(BeZero())
}

// TestGRPCHealthThroughEnforcer checks the application's health service
// through the enforcer, as a grpc health probe behind it would.
func TestGRPCHealthThroughEnforcer(t *testing.T) {
	g := NewWithT(t)
	app, _ := ordersApp(t, nil)
	e := start(t, setup{config: grpcPolicy(namespace(t), "H2C", "Open", "1s", tenantRule("create", createPath, 1)), upstream: app})
	ctx, cancel := within(10 * time.Second)
	defer cancel()
	h := healthpb.NewHealthClient(dialGRPC(t, e.url))
	for _, service := range []string{"", orders.ServiceName} {
		resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		g.Expect(err).NotTo(HaveOccurred(), "service %q", service)
		g.Expect(resp.GetStatus()).To(Equal(healthpb.HealthCheckResponse_SERVING))
	}
}
