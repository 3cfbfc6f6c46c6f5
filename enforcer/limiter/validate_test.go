package limiter

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestInvalidRequestsFailBeforeRedis(t *testing.T) {
	valid := func() Request {
		return Request{Bucket: Bucket{Namespace: "shop", Policy: "api", Rule: "r", Tenant: HashTenant("s", "acme")},
			Algorithm: TokenBucket, Cost: 1, Windows: []Window{{Requests: 10, Period: time.Minute}}}
	}
	cases := map[string]struct {
		edit func(*Request)
		want string
	}{
		"zero requests":     {func(r *Request) { r.Windows[0].Requests = 0 }, "requests must be at least 1"},
		"negative requests": {func(r *Request) { r.Windows[0].Requests = -5 }, "requests must be at least 1"},
		"zero period":       {func(r *Request) { r.Windows[0].Period = 0 }, "period must be a whole number of milliseconds"},
		"negative period":   {func(r *Request) { r.Windows[0].Period = -time.Second }, "period must be"},
		"sub-ms period":     {func(r *Request) { r.Windows[0].Period = 1500 * time.Microsecond }, "period must be"},
		"zero cost":         {func(r *Request) { r.Cost = 0 }, "cost must be at least 1"},
		"cost above limit":  {func(r *Request) { r.Cost = 11 }, "cost 11 exceeds its capacity 10"},
		"cost above burst": {func(r *Request) {
			r.Windows[0].Burst = 3
			r.Cost = 4
		}, "cost 4 exceeds its capacity 3"},
		"negative burst": {func(r *Request) { r.Windows[0].Burst = -1 }, "burst must not be negative"},
		"no windows":     {func(r *Request) { r.Windows = nil }, "1 to 8 windows"},
		"same period twice": {func(r *Request) {
			r.Windows = append(r.Windows, Window{Requests: 20, Period: time.Minute})
		}, "share the period 1m0s"},
		"empty tenant":      {func(r *Request) { r.Bucket.Tenant = HashTenant("s", "") }, "empty tenant"},
		"empty rule":        {func(r *Request) { r.Bucket.Rule = "" }, "empty rule"},
		"brace in policy":   {func(r *Request) { r.Bucket.Policy = "a}b" }, "contains '{', '}' or '/'"},
		"unknown algorithm": {func(r *Request) { r.Algorithm = "LeakyBucket" }, `unknown algorithm "LeakyBucket"`},
	}
	// Nothing listens here: a request that reached Redis would fail to dial
	// instead of failing validation.
	r := newRedis(t, "redis://127.0.0.1:1")
	guard := NewGuard(r)
	defer guard.Close()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			req := valid()
			c.edit(&req)
			_, err := r.Allow(context.Background(), req)
			g.Expect(err).To(MatchError(ErrInvalidRequest))
			g.Expect(err).To(MatchError(ContainSubstring(c.want)))
			_, err = newRule(req.Bucket, req.Algorithm, req.Windows, req.Cost, req.Failure)
			if !strings.Contains(c.want, "tenant") {
				g.Expect(err).To(MatchError(ContainSubstring(c.want)), "NewRule refuses it, once, at compile")
			}
			_, err = guard.Allow(context.Background(), req)
			g.Expect(err).To(MatchError(ErrInvalidRequest), "the guard refuses it too, without a failure-mode decision")
		})
	}
	g := NewWithT(t)
	ok := valid()
	_, err := newRule(ok.Bucket, ok.Algorithm, ok.Windows, ok.Cost, ok.Failure)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(guard.Health().ConsecutiveFailures).To(BeZero(), "no invalid request reached Redis")
}
