package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// twoPolicies is a compiled configuration of policies shop (domain shop,
// on --redis-url) and orders (domain orders, on the Redis of ordersEnv).
func twoPolicies(t *testing.T, ordersEnv string) []byte {
	t.Helper()
	var shop, orders config.Config
	if err := json.Unmarshal(policyConfig(t, "shop", "shop", 1, 5), &shop); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(policyConfig(t, "orders", "orders", 1, 5), &orders); err != nil {
		t.Fatal(err)
	}
	orders.Policies[0].RedisURLEnv = ordersEnv
	shop.Policies = append(shop.Policies, orders.Policies...)
	b, err := json.Marshal(&shop)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// A policy naming its own Redis is decided on it, the others on
// --redis-url; a policy whose variable is unset is refused at reload,
// naming the policy and the variable, and the last good configuration
// keeps serving.
func TestPoliciesOnTheirOwnRedis(t *testing.T) {
	g := NewWithT(t)
	redis.SetLogger(quietRedis{})
	ctx := context.Background()
	def, own := redistest.Start(t), redistest.Start(t)
	file := filepath.Join(t.TempDir(), "config.json")
	g.Expect(os.WriteFile(file, twoPolicies(t, "SLUICE_REDIS_URL_ORDERS"), 0o644)).To(Succeed())
	env := map[string]string{"REDIS_URL": def.Addr(), "SLUICE_REDIS_URL_ORDERS": own.URL()}
	lookupEnv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	o, _, err := parseFlags([]string{"--policy-config", file, "--listen", "127.0.0.1:0", "--admin-listen", "localhost:0", "--http-listen", ""}, lookupEnv)
	g.Expect(err).NotTo(HaveOccurred())
	s, err := newService(o, lookupEnv, slog.New(slog.DiscardHandler))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { s.closeListeners(); s.close() }()

	call := func(domain string) ratelimitv3.RateLimitResponse_Code {
		resp, err := s.rls.ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{Domain: domain,
			Descriptors: []*ratelimitv3common.RateLimitDescriptor{{Entries: []*ratelimitv3common.RateLimitDescriptor_Entry{{Key: "customer", Value: "a"}}}}})
		g.Expect(err).NotTo(HaveOccurred())
		return resp.OverallCode
	}
	g.Expect(call("shop")).To(Equal(ratelimitv3.RateLimitResponse_OK))
	defKeys := def.Client().Keys(ctx, "*").Val()
	g.Expect(defKeys).To(HaveLen(1), "shop counts on --redis-url")
	g.Expect(own.Client().Keys(ctx, "*").Val()).To(BeEmpty())
	for range 5 {
		g.Expect(call("orders")).To(Equal(ratelimitv3.RateLimitResponse_OK))
	}
	g.Expect(call("orders")).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT))
	g.Expect(own.Client().Keys(ctx, "*").Val()).To(HaveLen(1), "orders counts on its own Redis")
	g.Expect(def.Client().Keys(ctx, "*").Val()).To(Equal(defKeys), "and not on --redis-url")
	g.Expect(call("shop")).To(Equal(ratelimitv3.RateLimitResponse_OK), "shop's count is its own")

	snap := s.snaps.Load()
	g.Expect(snap.Backends()).To(HaveLen(2))
	ready, why := s.readiness()
	g.Expect(ready).To(BeTrue(), why)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/status", nil)
	req.RemoteAddr = "127.0.0.1:1234"
	s.adminMux().ServeHTTP(rec, req)
	g.Expect(rec.Code).To(Equal(http.StatusOK))
	g.Expect(rec.Body.String()).To(ContainSubstring("SLUICE_REDIS_URL_ORDERS"))

	// A variable that is unset: refused, the configuration in service stays.
	g.Expect(os.WriteFile(file, twoPolicies(t, "SLUICE_REDIS_URL_MISSING"), 0o644)).To(Succeed())
	err = s.reloader.Reload()
	g.Expect(err).To(MatchError(ContainSubstring("policy orders: environment variable SLUICE_REDIS_URL_MISSING, which holds its Redis URL, is not set")))
	g.Expect(s.reloader.State().LastError).To(ContainSubstring("SLUICE_REDIS_URL_MISSING"))
	g.Expect(call("orders")).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT), "the last good configuration keeps serving")
	g.Expect(call("shop")).To(Equal(ratelimitv3.RateLimitResponse_OK))

	// A URL that does not parse: refused as well, naming the variable.
	env["SLUICE_REDIS_URL_BAD"] = "http://nope:6379"
	g.Expect(os.WriteFile(file, twoPolicies(t, "SLUICE_REDIS_URL_BAD"), 0o644)).To(Succeed())
	g.Expect(s.reloader.Reload()).To(MatchError(ContainSubstring("policy orders: environment variable SLUICE_REDIS_URL_BAD")))
	g.Expect(call("orders")).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT))

	// Redis of orders down: /readyz names its backend.
	own.Stop()
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	go s.backends.Monitor(mctx, 50*time.Millisecond, 200*time.Millisecond)
	g.Eventually(func() string { _, why := s.readiness(); return why }).WithTimeout(5 * time.Second).Should(HavePrefix("redis unreachable: SLUICE_REDIS_URL_ORDERS: "))
}
