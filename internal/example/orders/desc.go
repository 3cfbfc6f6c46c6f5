package orders

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// protoFile is the name shop.v1.Orders is registered under, as if it came
// from a .proto file of that name.
const protoFile = "shop/v1/orders.proto"

// ServiceDesc is shop.v1.Orders for grpc.Server.RegisterService and
// ClientConn.NewStream: what protoc-gen-go-grpc would generate from
//
//	service Orders {
//	  rpc Create(google.protobuf.StringValue) returns (google.protobuf.StringValue);
//	  rpc Watch(google.protobuf.Int64Value) returns (stream google.protobuf.StringValue);
//	  rpc Upload(stream google.protobuf.StringValue) returns (google.protobuf.Int64Value);
//	  rpc Chat(stream google.protobuf.StringValue) returns (stream google.protobuf.StringValue);
//	}
var ServiceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*ordersServer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Create", Handler: createHandler}},
	Streams: []grpc.StreamDesc{
		{StreamName: "Watch", Handler: watchHandler, ServerStreams: true},
		{StreamName: "Upload", Handler: uploadHandler, ClientStreams: true},
		{StreamName: "Chat", Handler: chatHandler, ServerStreams: true, ClientStreams: true},
	},
	Metadata: protoFile,
}

// createHandler is a grpc.MethodHandler, whose signature puts the server
// before the context.
func createHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) { //nolint:revive // the signature is grpc.MethodHandler's
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	call := func(ctx context.Context, req any) (any, error) {
		return srv.(ordersServer).create(ctx, req.(*wrapperspb.StringValue))
	}
	if interceptor == nil {
		return call(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: CreateMethod}, call)
}

func watchHandler(srv any, stream grpc.ServerStream) error {
	in := new(wrapperspb.Int64Value)
	if err := stream.RecvMsg(in); err != nil {
		return err
	}
	return srv.(ordersServer).watch(in, &grpc.GenericServerStream[wrapperspb.Int64Value, wrapperspb.StringValue]{ServerStream: stream})
}

func uploadHandler(srv any, stream grpc.ServerStream) error {
	return srv.(ordersServer).upload(&grpc.GenericServerStream[wrapperspb.StringValue, wrapperspb.Int64Value]{ServerStream: stream})
}

func chatHandler(srv any, stream grpc.ServerStream) error {
	return srv.(ordersServer).chat(&grpc.GenericServerStream[wrapperspb.StringValue, wrapperspb.StringValue]{ServerStream: stream})
}

// fileDescriptor describes shop.v1.Orders for server reflection (grpcurl
// describe, list).
func fileDescriptor() *descriptorpb.FileDescriptorProto {
	const str, i64 = ".google.protobuf.StringValue", ".google.protobuf.Int64Value"
	method := func(name, in, out string, clientStreams, serverStreams bool) *descriptorpb.MethodDescriptorProto {
		return &descriptorpb.MethodDescriptorProto{Name: proto.String(name), InputType: proto.String(in), OutputType: proto.String(out),
			ClientStreaming: proto.Bool(clientStreams), ServerStreaming: proto.Bool(serverStreams)}
	}
	return &descriptorpb.FileDescriptorProto{
		Name:       proto.String(protoFile),
		Package:    proto.String("shop.v1"),
		Dependency: []string{"google/protobuf/wrappers.proto"},
		Syntax:     proto.String("proto3"),
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Orders"),
			Method: []*descriptorpb.MethodDescriptorProto{
				method("Create", str, str, false, false),
				method("Watch", i64, str, false, true),
				method("Upload", str, i64, true, false),
				method("Chat", str, str, true, true),
			},
		}},
	}
}

var registerOnce = sync.OnceValue(func() error {
	// wrapperspb's import has registered wrappers.proto, which this file
	// depends on.
	f, err := protodesc.NewFile(fileDescriptor(), protoregistry.GlobalFiles)
	if err != nil {
		return fmt.Errorf("describe %s: %w", protoFile, err)
	}
	return protoregistry.GlobalFiles.RegisterFile(f)
})
