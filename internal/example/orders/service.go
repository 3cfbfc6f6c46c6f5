// Package orders is Sluice's gRPC sample application: service
// shop.v1.Orders with one method of each kind (Create unary, Watch server
// streaming, Upload client streaming, Chat bidirectional), written without
// generated code: a hand-written grpc.ServiceDesc over the well-known
// wrapper messages (google/protobuf/wrappers.proto). The server also has the
// gRPC health service and server reflection, so grpcurl and grpc-health-probe
// work against it.
//
// hack/orders runs it as a program, the gRPC application of the e2e suite
// and `make demo`; the enforcer tests and the gRPC benchmark embed it.
package orders

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The service and its methods as they appear on the wire: the HTTP/2 path
// of a call is its full method name, which is what rules match.
const (
	ServiceName  = "shop.v1.Orders"
	CreateMethod = "/shop.v1.Orders/Create"
	WatchMethod  = "/shop.v1.Orders/Watch"
	UploadMethod = "/shop.v1.Orders/Upload"
	ChatMethod   = "/shop.v1.Orders/Chat"
)

// Metadata the service sends on every call: the pod that answered (header)
// and how many calls it has served (trailer), so a client sees that both
// header and trailer metadata came through.
const (
	PodHeader     = "x-orders-pod"
	ServedTrailer = "x-orders-served"
)

// WaitItem makes Create wait for its caller to go away (a deadline or a
// cancel) instead of answering.
const WaitItem = "wait"

// WatchInterval is how often an endless Watch (count 0) sends an update.
const WatchInterval = 20 * time.Millisecond

// Call is one finished call as the service saw it.
type Call struct {
	Method   string
	Metadata metadata.MD
	// Deadline is the call's deadline (from grpc-timeout), zero without one.
	Deadline time.Time
	// Err is context.Canceled or context.DeadlineExceeded when the caller
	// went away before the call ended, else what the handler returned.
	Err error
}

// Service implements shop.v1.Orders.
type Service struct {
	// Pod names the instance in the x-orders-pod header.
	Pod string
	// Observe, when set, is called once per finished call of Orders.
	Observe func(Call)
	served  atomic.Int64
}

// Served is how many calls of Orders have reached the service.
func (s *Service) Served() int64 { return s.served.Load() }

// ordersServer is what ServiceDesc's handlers call.
type ordersServer interface {
	create(ctx context.Context, item *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
	watch(count *wrapperspb.Int64Value, stream grpc.ServerStreamingServer[wrapperspb.StringValue]) error
	upload(stream grpc.ClientStreamingServer[wrapperspb.StringValue, wrapperspb.Int64Value]) error
	chat(stream grpc.BidiStreamingServer[wrapperspb.StringValue, wrapperspb.StringValue]) error
}

var _ ordersServer = (*Service)(nil)

// begin counts a call and sends the header metadata.
func (s *Service) begin(ctx context.Context) {
	n := s.served.Add(1)
	_ = grpc.SetHeader(ctx, metadata.Pairs(PodHeader, s.Pod))
	_ = grpc.SetTrailer(ctx, metadata.Pairs(ServedTrailer, strconv.FormatInt(n, 10)))
}

// create answers "created <item>"; the item "wait" waits for the caller
// to give up.
func (s *Service) create(ctx context.Context, item *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	s.begin(ctx)
	if item.GetValue() == WaitItem {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if item.GetValue() == "" {
		return nil, status.Error(codes.InvalidArgument, "an order needs an item")
	}
	return wrapperspb.String("created " + item.GetValue()), nil
}

// watch sends count updates, or one every WatchInterval until the caller
// cancels when count is 0.
func (s *Service) watch(count *wrapperspb.Int64Value, stream grpc.ServerStreamingServer[wrapperspb.StringValue]) error {
	ctx := stream.Context()
	s.begin(ctx)
	tick := time.NewTicker(WatchInterval)
	defer tick.Stop()
	for i := int64(1); count.GetValue() == 0 || i <= count.GetValue(); i++ {
		if err := stream.Send(wrapperspb.String("update " + strconv.FormatInt(i, 10))); err != nil {
			return err
		}
		if count.GetValue() == 0 {
			select {
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			case <-tick.C:
			}
		}
	}
	return nil
}

// upload counts the items it receives.
func (s *Service) upload(stream grpc.ClientStreamingServer[wrapperspb.StringValue, wrapperspb.Int64Value]) error {
	s.begin(stream.Context())
	var n int64
	for {
		_, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(wrapperspb.Int64(n))
		}
		if err != nil {
			return err
		}
		n++
	}
}

// chat answers each message with "echo: <message>".
func (s *Service) chat(stream grpc.BidiStreamingServer[wrapperspb.StringValue, wrapperspb.StringValue]) error {
	s.begin(stream.Context())
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(wrapperspb.String("echo: " + m.GetValue())); err != nil {
			return err
		}
	}
}

// observe reports a finished call of Orders.
func (s *Service) observe(ctx context.Context, method string, err error) {
	if s.Observe == nil {
		return
	}
	c := Call{Method: method, Err: err}
	c.Metadata, _ = metadata.FromIncomingContext(ctx)
	c.Deadline, _ = ctx.Deadline()
	if ctx.Err() != nil {
		c.Err = ctx.Err()
	}
	s.Observe(c)
}
