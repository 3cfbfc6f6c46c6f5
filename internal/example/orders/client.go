package orders

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Client calls shop.v1.Orders on a connection (a *grpc.ClientConn).
type Client struct {
	cc grpc.ClientConnInterface
}

// NewClient is a client of shop.v1.Orders on cc.
func NewClient(cc grpc.ClientConnInterface) *Client { return &Client{cc: cc} }

// Create orders item; the answer is "created <item>".
func (c *Client) Create(ctx context.Context, item string, opts ...grpc.CallOption) (string, error) {
	out := new(wrapperspb.StringValue)
	if err := c.cc.Invoke(ctx, CreateMethod, wrapperspb.String(item), out, opts...); err != nil {
		return "", err
	}
	return out.GetValue(), nil
}

// Watch asks for count updates ("update 1", ...), or an endless stream of
// them with count 0.
func (c *Client) Watch(ctx context.Context, count int64, opts ...grpc.CallOption) (grpc.ServerStreamingClient[wrapperspb.StringValue], error) {
	stream, err := c.cc.NewStream(ctx, &ServiceDesc.Streams[0], WatchMethod, opts...)
	if err != nil {
		return nil, err
	}
	x := &grpc.GenericClientStream[wrapperspb.Int64Value, wrapperspb.StringValue]{ClientStream: stream}
	if err := x.SendMsg(wrapperspb.Int64(count)); err != nil {
		return nil, err
	}
	if err := x.CloseSend(); err != nil {
		return nil, err
	}
	return x, nil
}

// Upload sends items; CloseAndRecv answers how many arrived.
func (c *Client) Upload(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStreamingClient[wrapperspb.StringValue, wrapperspb.Int64Value], error) {
	stream, err := c.cc.NewStream(ctx, &ServiceDesc.Streams[1], UploadMethod, opts...)
	if err != nil {
		return nil, err
	}
	return &grpc.GenericClientStream[wrapperspb.StringValue, wrapperspb.Int64Value]{ClientStream: stream}, nil
}

// Chat answers each message sent with "echo: <message>".
func (c *Client) Chat(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[wrapperspb.StringValue, wrapperspb.StringValue], error) {
	stream, err := c.cc.NewStream(ctx, &ServiceDesc.Streams[2], ChatMethod, opts...)
	if err != nil {
		return nil, err
	}
	return &grpc.GenericClientStream[wrapperspb.StringValue, wrapperspb.StringValue]{ClientStream: stream}, nil
}
