package orders

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// NewServer is a grpc.Server with s as shop.v1.Orders, the health service
// (serving, for "" and for shop.v1.Orders) and server reflection.
func NewServer(s *Service, opts ...grpc.ServerOption) (*grpc.Server, error) {
	if err := registerOnce(); err != nil {
		return nil, err
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(s.observeUnary), grpc.ChainStreamInterceptor(s.observeStream))
	gs := grpc.NewServer(opts...)
	gs.RegisterService(&ServiceDesc, s)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	return gs, nil
}

func (s *Service) observeUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if info.Server == any(s) {
		s.observe(ctx, info.FullMethod, err)
	}
	return resp, err
}

func (s *Service) observeStream(srv any, stream grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	err := handler(srv, stream)
	if srv == any(s) {
		s.observe(stream.Context(), info.FullMethod, err)
	}
	return err
}
