package main

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-dev/sluice/internal/example/orders"
)

func TestGRPCClosedLoopCallsCreate(t *testing.T) {
	g := NewWithT(t)
	calls := make(chan orders.Call, 1000)
	gs, err := orders.NewServer(&orders.Service{Observe: func(c orders.Call) {
		select {
		case calls <- c:
		default:
		}
	}})
	g.Expect(err).NotTo(HaveOccurred())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()

	tg, err := newGRPCTarget(context.Background(), "http://"+ln.Addr().String(), []string{"X-Tenant-ID: tenant-{tenant}"}, 2, 2, time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	defer tg.close()
	p := plan{Concurrency: 4, Duration: 200 * time.Millisecond, MaxRequests: 100, Timeout: time.Second}
	r := buildReport(tg.url, p, runCallers(context.Background(), tg.caller, p))
	g.Expect(r.Requests).To(Equal(uint64(100)))
	g.Expect(r.Status.OK).To(Equal(uint64(100)))
	g.Expect(r.Errors).To(BeZero())
	c := <-calls
	g.Expect(c.Method).To(Equal(orders.CreateMethod))
	g.Expect(c.Metadata.Get("x-tenant-id")).To(ConsistOf(BeElementOf("tenant-0", "tenant-1")))
}

func TestGRPCStatusesAsHTTP(t *testing.T) {
	withRetry, _ := status.New(codes.Unavailable, "limiter unavailable").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	for _, tc := range []struct {
		err    error
		status int
		isErr  bool
	}{
		{nil, 200, false},
		{status.Error(codes.ResourceExhausted, "over the limit"), 429, false},
		{withRetry.Err(), 503, false},
		{status.Error(codes.Unavailable, "connection refused"), 0, true},
		{status.Error(codes.DeadlineExceeded, "late"), 0, true},
		{errors.New("not a status"), 0, true},
	} {
		g := NewWithT(t)
		code, err := grpcHTTPStatus(tc.err)
		g.Expect(code).To(Equal(tc.status), "%v", tc.err)
		g.Expect(err != nil).To(Equal(tc.isErr), "%v", tc.err)
	}
}

func TestGRPCTargetIsLoopbackOnly(t *testing.T) {
	g := NewWithT(t)
	_, err := newGRPCTarget(context.Background(), "http://192.0.2.1:9080", nil, 1, 1, time.Second)
	g.Expect(err).To(MatchError(ContainSubstring("loopback")))
	_, err = newGRPCTarget(context.Background(), "http://127.0.0.1:9080/shop.v1.Orders/Create", nil, 1, 1, time.Second)
	g.Expect(err).To(MatchError(ContainSubstring("want http://HOST:PORT")))
}
