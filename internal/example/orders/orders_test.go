package orders

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// serve runs the service on a loopback port and returns a client
// connection to it.
func serve(t *testing.T, s *Service) *grpc.ClientConn {
	t.Helper()
	gs, err := NewServer(s)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func TestMethods(t *testing.T) {
	g := NewWithT(t)
	calls := make(chan Call, 10)
	cc := serve(t, &Service{Pod: "orders-0", Observe: func(c Call) { calls <- c }})
	c := NewClient(cc)
	ctx := context.Background()

	var header, trailer metadata.MD
	out, err := c.Create(metadata.AppendToOutgoingContext(ctx, "x-tenant-id", "acme"), "book", grpc.Header(&header), grpc.Trailer(&trailer))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("created book"))
	g.Expect(header.Get(PodHeader)).To(Equal([]string{"orders-0"}))
	g.Expect(trailer.Get(ServedTrailer)).To(Equal([]string{"1"}))
	call := <-calls
	g.Expect(call.Method).To(Equal(CreateMethod))
	g.Expect(call.Metadata.Get("x-tenant-id")).To(Equal([]string{"acme"}))

	_, err = c.Create(ctx, "")
	g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument))
	<-calls

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
	g.Expect(updates).To(Equal([]string{"update 1", "update 2", "update 3"}))
	<-calls

	upload, err := c.Upload(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, item := range []string{"a", "b"} {
		g.Expect(upload.Send(wrapperspb.String(item))).To(Succeed())
	}
	n, err := upload.CloseAndRecv()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.GetValue()).To(Equal(int64(2)))
	<-calls

	chat, err := c.Chat(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(chat.Send(wrapperspb.String("hi"))).To(Succeed())
	m, err := chat.Recv()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.GetValue()).To(Equal("echo: hi"))
	g.Expect(chat.CloseSend()).To(Succeed())
	_, err = chat.Recv()
	g.Expect(err).To(MatchError(io.EOF))
	<-calls
}

func TestWaitEndsWithTheCaller(t *testing.T) {
	g := NewWithT(t)
	calls := make(chan Call, 1)
	c := NewClient(serve(t, &Service{Observe: func(c Call) { calls <- c }}))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Create(ctx, WaitItem)
	g.Expect(status.Code(err)).To(Equal(codes.DeadlineExceeded))
	call := <-calls
	g.Expect(call.Deadline).NotTo(BeZero())
	// The server's own timer or the client's RST_STREAM, whichever is first.
	g.Expect(call.Err).To(Or(MatchError(context.DeadlineExceeded), MatchError(context.Canceled)))
}

func TestHealthAndReflection(t *testing.T) {
	g := NewWithT(t)
	cc := serve(t, &Service{})
	ctx := context.Background()
	h, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: ServiceName})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.GetStatus()).To(Equal(healthpb.HealthCheckResponse_SERVING))

	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: ServiceName}})).To(Succeed())
	resp, err := stream.Recv()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.GetFileDescriptorResponse().GetFileDescriptorProto()).NotTo(BeEmpty(), "reflection describes %s: %v", ServiceName, resp)
}
