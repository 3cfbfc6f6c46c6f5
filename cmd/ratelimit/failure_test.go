package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

const ok, overLimit = ratelimitv3.RateLimitResponse_OK, ratelimitv3.RateLimitResponse_OVER_LIMIT

// Redis is killed and comes back, empty: each failure mode answers while
// it is gone, and the program decides from Redis again once it is back.
// The closed domain's file says nothing: --failure-mode decides for it.
func TestFailureModesWhileRedisIsGone(t *testing.T) {
	g := NewWithT(t)
	srv := redistest.Start(t)
	dir := t.TempDir()
	writeFile(t, dir, "open.yaml", "domain: open\nsluice: {failureMode: Open}\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 1}}]")
	writeFile(t, dir, "closed.yaml", "domain: closed\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 2}}]")
	// Two instances share the limit: alone, each admits its half.
	writeFile(t, dir, "local.yaml", "domain: local\nsluice: {failureMode: LocalFallback, replicas: 2}\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 6}}]")
	p := startProgram(t, dir, srv.URL(), "--failure-mode", "Closed")

	call := func(domain string) *ratelimitv3.RateLimitResponse {
		resp, err := shouldRateLimit(p.client, &ratelimitv3.RateLimitRequest{Domain: domain,
			Descriptors: []*ratelimitv3common.RateLimitDescriptor{desc("user", "ann")}})
		g.Expect(err).NotTo(HaveOccurred(), "every call is answered, Redis or not")
		g.Expect(resp.Statuses).To(HaveLen(1))
		g.Expect(resp.Statuses[0].Code).To(Equal(resp.OverallCode))
		return resp
	}
	code := func(domain string) func() ratelimitv3.RateLimitResponse_Code {
		return func() ratelimitv3.RateLimitResponse_Code { return call(domain).OverallCode }
	}
	for _, d := range []string{"open", "closed", "local"} {
		g.Expect(call(d).OverallCode).To(Equal(ok), "%s with Redis", d)
	}
	g.Eventually(func() int { c, _ := p.get("/readyz"); return c }, 5*time.Second, 50*time.Millisecond).Should(Equal(http.StatusOK))

	srv.Stop()
	for range 5 {
		g.Expect(call("open").OverallCode).To(Equal(ok), "Open admits while Redis is gone, past its limit of 1")
		resp := call("closed")
		g.Expect(resp.OverallCode).To(Equal(overLimit), "Closed refuses while Redis is gone")
		g.Expect(resp.Statuses[0].DurationUntilReset.AsDuration()).To(BeNumerically(">", 0), "and says when to try again")
	}
	for i := range 3 {
		g.Expect(call("local").OverallCode).To(Equal(ok), "LocalFallback admits its share, 6/2, call %d", i+1)
	}
	g.Expect(call("local").OverallCode).To(Equal(overLimit), "and refuses past it")
	g.Eventually(func() int { c, _ := p.get("/readyz"); return c }, 5*time.Second, 50*time.Millisecond).Should(Equal(http.StatusServiceUnavailable))
	g.Expect(p.metric("sluice_ratelimit_degraded_total")).To(Equal("14"), "every descriptor decided by a failure mode is counted")

	g.Expect(srv.Restart()).To(Succeed())
	g.Eventually(func() int { c, _ := p.get("/readyz"); return c }, 10*time.Second, 50*time.Millisecond).Should(Equal(http.StatusOK))
	g.Eventually(code("closed"), 5*time.Second, 50*time.Millisecond).Should(Equal(ok), "Redis decides Closed's calls again")
	// The restarted Redis is empty: what it counts from now on decides.
	g.Expect(call("closed").OverallCode).To(Equal(ok))
	g.Expect(call("closed").OverallCode).To(Equal(overLimit), "its limit of 2, counted in Redis")
	g.Expect(call("open").OverallCode).To(Equal(ok))
	g.Expect(call("open").OverallCode).To(Equal(overLimit), "Open's limit of 1 holds again")
	resp := call("local")
	g.Expect(resp.OverallCode).To(Equal(ok), "the local count is left behind")
	g.Expect(resp.Statuses[0].LimitRemaining).To(Equal(uint32(5)), "Redis' count of the whole limit, not the local share")
	keys, err := srv.Client().Keys(context.Background(), "sl:*").Result()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys).To(HaveLen(3), "one bucket per domain, in Redis")
}
