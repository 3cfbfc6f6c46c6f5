package main

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// The operator writes a large configuration as config.json.gz instead of
// config.json: the service takes it when the ConfigMap's key changes, and
// keeps it when the compressed file is broken.
func TestPolicyConfigCompressed(t *testing.T) {
	g := NewWithT(t)
	srv := redistest.Start(t)
	vol := &configMapVolume{t: t, dir: t.TempDir()}
	vol.write("config.json", policyConfig(t, "orders-limit", "orders", 1, 1))
	p := startAdminProgram(t, []string{"--policy-config", filepath.Join(vol.dir, "config.json")}, []string{"REDIS_URL=" + srv.Addr()})
	g.Eventually(func() int { code, _ := p.get("/readyz", ""); return code }, 10*time.Second, 50*time.Millisecond).Should(Equal(http.StatusOK))

	second := policyConfig(t, "orders-limit", "orders", 2, 3)
	secondCfg, err := config.Parse(second)
	g.Expect(err).NotTo(HaveOccurred())
	vol.write("config.json.gz", config.Compress(second))
	g.Eventually(func() string { return p.status(g, "").Config.Hash }, 10*time.Second, 50*time.Millisecond).Should(Equal(secondCfg.Hash()))
	call := p.client(t)
	for range 3 {
		g.Expect(call("orders", "customer", "a")).To(Equal(ratelimitv3.RateLimitResponse_OK))
	}
	g.Expect(call("orders", "customer", "a")).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT))

	vol.write("config.json.gz", config.Compress(second)[:20])
	g.Eventually(func() string { return p.status(g, "").Config.LastReloadError }, 10*time.Second, 50*time.Millisecond).
		Should(ContainSubstring("config.json.gz: decompress"))
	g.Expect(p.status(g, "").Config.Hash).To(Equal(secondCfg.Hash()), "the last good configuration stays")
	g.Expect(call("orders", "customer", "a")).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT))
}
