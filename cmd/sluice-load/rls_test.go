package main

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
)

// recordingRLS answers OVER_LIMIT for user u1 and OK otherwise, and keeps
// what it was asked.
type recordingRLS struct {
	ratelimitv3.UnimplementedRateLimitServiceServer
	mu   sync.Mutex
	seen []*ratelimitv3.RateLimitRequest
}

func (s *recordingRLS) ShouldRateLimit(_ context.Context, req *ratelimitv3.RateLimitRequest) (*ratelimitv3.RateLimitResponse, error) {
	s.mu.Lock()
	s.seen = append(s.seen, req)
	s.mu.Unlock()
	code := ratelimitv3.RateLimitResponse_OK
	if req.GetDescriptors()[0].GetEntries()[1].GetValue() == "u1" {
		code = ratelimitv3.RateLimitResponse_OVER_LIMIT
	}
	return &ratelimitv3.RateLimitResponse{OverallCode: code}, nil
}

func TestRLSCallsCarryTheDescriptorsAndRotateTenants(t *testing.T) {
	g := NewWithT(t)
	srv := &recordingRLS{}
	gs := grpc.NewServer()
	ratelimitv3.RegisterRateLimitServiceServer(gs, srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()

	o := &loadOptions{plan: plan{Concurrency: 2, Duration: time.Second, MaxRequests: 40, Timeout: time.Second}}
	tg, err := newRLSTarget(context.Background(), "http://"+ln.Addr().String(), "ingress",
		[]string{"generic_key=api,user_id=u{tenant}", "remote_address=10.0.0.1"}, 2, 1, o)
	g.Expect(err).NotTo(HaveOccurred())
	defer tg.close()
	r := buildReport(tg.url, o.plan, runCallers(context.Background(), tg.caller, o.plan))
	g.Expect(r.Requests).To(Equal(uint64(40)))
	g.Expect(r.Errors).To(BeZero())
	// Tenants alternate: half the calls are u1's, refused.
	g.Expect(r.Status.OK).To(Equal(uint64(20)))
	g.Expect(r.Status.TooManyRequests).To(Equal(uint64(20)))

	srv.mu.Lock()
	defer srv.mu.Unlock()
	req := srv.seen[0]
	g.Expect(req.GetDomain()).To(Equal("ingress"))
	g.Expect(req.GetDescriptors()).To(HaveLen(2))
	g.Expect(req.GetDescriptors()[0].GetEntries()[0].GetKey()).To(Equal("generic_key"))
	g.Expect(req.GetDescriptors()[0].GetEntries()[1].GetValue()).To(BeElementOf("u0", "u1"))
	g.Expect(req.GetDescriptors()[1].GetEntries()[0].GetValue()).To(Equal("10.0.0.1"))
}

func TestRLSOptionsAreChecked(t *testing.T) {
	g := NewWithT(t)
	o := &loadOptions{plan: plan{Timeout: time.Second}}
	_, err := newRLSTarget(context.Background(), "http://127.0.0.1:1", "ingress", nil, 1, 1, o)
	g.Expect(err).To(MatchError(ContainSubstring("--descriptor")))
	_, err = newRLSTarget(context.Background(), "http://127.0.0.1:1", "ingress", []string{"no-equals"}, 1, 1, o)
	g.Expect(err).To(MatchError(ContainSubstring("want key=value")))
	_, err = newRLSTarget(context.Background(), "http://192.0.2.1:1", "ingress", []string{"a=b"}, 1, 1, o)
	g.Expect(err).To(MatchError(ContainSubstring("loopback")))
}
