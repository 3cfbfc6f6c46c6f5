package rls

import (
	"context"
	"testing"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rls/erlconfig"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// backendOn is a Backend on srv, closed when the test ends.
func backendOn(t *testing.T, srv *redistest.Server) *Backend {
	t.Helper()
	client, err := limiter.NewClient(srv.URL(), limiter.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := limiter.NewRedis(client)
	if err != nil {
		t.Fatal(err)
	}
	g := limiter.NewGuard(r)
	t.Cleanup(func() { g.Close(); _ = r.Close(); _ = client.Close() })
	return &Backend{Guard: g, Redis: r}
}

// Domains on two Redis servers: each call counts on its domain's server
// only, and the refund of a refused call whose descriptors live on both
// gives back on each, so that the other server's count is as it was.
func TestDomainsOnTheirOwnBackends(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srvA, srvB := redistest.Start(t), redistest.Start(t)
	a, b := backendOn(t, srvA), backendOn(t, srvB)
	var parsed []*erlconfig.File
	for _, f := range []string{
		"domain: da\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 3}}]",
		"domain: db\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 1}}]",
	} {
		p, err := erlconfig.Parse(f[8:10]+".yaml", []byte(f))
		g.Expect(err).NotTo(HaveOccurred())
		parsed = append(parsed, p)
	}
	cfg, err := erlconfig.Compile(parsed, erlconfig.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	s := NewService(a.Guard, a.Redis, nil)
	g.Expect(s.ApplyAllOn(ctx, func(p *config.Policy) (*Backend, error) {
		if p.Domain == "db" {
			return b, nil
		}
		return nil, nil
	}, cfg)).To(Succeed())

	for _, domain := range []string{"da", "db"} {
		resp, err := s.ShouldRateLimit(ctx, callOf(domain, descriptor("user", "ann")))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.OverallCode).To(Equal(ok))
	}
	keysA, keysB := srvA.Client().Keys(ctx, "*").Val(), srvB.Client().Keys(ctx, "*").Val()
	g.Expect(keysA).To(HaveLen(1), "domain da counts on its server")
	g.Expect(keysB).To(HaveLen(1), "domain db counts on its server")
	g.Expect(keysA).NotTo(Equal(keysB))

	// A refused call whose descriptors live on both backends: da's is
	// admitted on A, db's refused on B (its one request is used).
	t0 := s.Table()
	ra := t0.Match("da", descriptor("user", "bob").GetEntries())
	rb := t0.Match("db", descriptor("user", "ann").GetEntries())
	g.Expect(ra).NotTo(BeNil())
	g.Expect(rb).NotTo(BeNil())
	checks := []limiter.Request{ra.Request(descriptor("user", "bob").GetEntries(), 1), rb.Request(descriptor("user", "ann").GetEntries(), 1)}
	on := []*Backend{s.backendOf(ra.domain), s.backendOf(rb.domain)}
	g.Expect(on[0].Guard).To(BeIdenticalTo(a.Guard))
	g.Expect(on[1].Guard).To(BeIdenticalTo(b.Guard))
	before, err := a.Redis.Peek(ctx, checks[0])
	g.Expect(err).NotTo(HaveOccurred())
	outs := allowAll(ctx, checks, on)
	g.Expect(outs[0].Decision.Allowed).To(BeTrue())
	g.Expect(outs[1].Decision.Allowed).To(BeFalse())
	g.Expect(s.refund(ctx, checks, on, outs)).To(Equal([]bool{true, false}))
	after, err := a.Redis.Peek(ctx, checks[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Remaining).To(Equal(before.Remaining), "the refused call leaves A's count as it was")
}

func callOf(domain string, descs ...*ratelimitv3common.RateLimitDescriptor) *ratelimitv3.RateLimitRequest {
	return &ratelimitv3.RateLimitRequest{Domain: domain, Descriptors: descs}
}
