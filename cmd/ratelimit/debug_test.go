package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// /debug/tenant shows the rule a descriptor is decided by and its bucket's
// state, as the calls left it, and reading it counts nothing.
func TestDebugTenantShowsADescriptorsBucket(t *testing.T) {
	g := NewWithT(t)
	srv := redistest.Start(t)
	dir := t.TempDir()
	writeFile(t, dir, "shop.yaml", `domain: shop
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: hour, requests_per_unit: 3}
  - key: health
    rate_limit: {unlimited: true}
`)
	p := startProgram(t, dir, srv.URL())
	hit := func(user string) ratelimitv3.RateLimitResponse_Code {
		resp, err := shouldRateLimit(p.client, &ratelimitv3.RateLimitRequest{Domain: "shop", Descriptors: []*ratelimitv3common.RateLimitDescriptor{desc("user", user)}})
		g.Expect(err).NotTo(HaveOccurred())
		return resp.OverallCode
	}
	read := func(query string) (int, descriptorReport) {
		code, body := p.get("/debug/tenant?" + query)
		var r descriptorReport
		if code == http.StatusOK {
			g.Expect(json.Unmarshal([]byte(body), &r)).To(Succeed(), body)
		}
		return code, r
	}

	g.Expect(hit("alice")).To(Equal(ratelimitv3.RateLimitResponse_OK))
	g.Expect(hit("alice")).To(Equal(ratelimitv3.RateLimitResponse_OK))
	for range 2 { // reading twice: the second sees what the first saw
		code, r := read("domain=shop&entry=user=alice")
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(r.Outcome).To(Equal("limited"))
		g.Expect(r.Rule).NotTo(BeEmpty())
		g.Expect(r.LimitName).To(Equal("per-user"))
		g.Expect(r.Tenant).To(BeEmpty(), "the bucket is named by the descriptor's entries, not by an identity")
		g.Expect(r.Allowed).To(BeTrue())
		g.Expect(r.Limit).To(BeEquivalentTo(3))
		g.Expect(r.Remaining).To(BeEquivalentTo(1))
		g.Expect(r.Windows).To(HaveLen(1))
		g.Expect(r.Windows[0].Requests).To(BeEquivalentTo(3))
		g.Expect(r.Windows[0].Remaining).To(BeEquivalentTo(1))
	}
	g.Expect(hit("alice")).To(Equal(ratelimitv3.RateLimitResponse_OK), "the reads took nothing")
	g.Expect(hit("alice")).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT))
	_, r := read("domain=shop&entry=user=alice")
	g.Expect(r.Allowed).To(BeFalse())
	g.Expect(r.Remaining).To(BeZero())
	g.Expect(r.RetryAfterSeconds).To(BeNumerically(">", 0))
	g.Expect(r.Windows[0].Refusing).To(BeTrue())

	_, r = read("domain=shop&entry=user=bob")
	g.Expect(r.Remaining).To(BeEquivalentTo(3), "another user's bucket is its own")
	_, r = read("domain=shop&entry=health=x")
	g.Expect(r.Outcome).To(Equal("unlimited"))
	g.Expect(r.Allowed).To(BeTrue())
	_, r = read("domain=shop&entry=other=x")
	g.Expect(r.Outcome).To(Equal("no_rule"))

	code, _ := read("domain=nope&entry=user=alice")
	g.Expect(code).To(Equal(http.StatusNotFound))
	code, _ = read("domain=shop")
	g.Expect(code).To(Equal(http.StatusBadRequest))
	code, _ = read("domain=shop&entry=user")
	g.Expect(code).To(Equal(http.StatusBadRequest))
}

// A calendar window of an operator's policy shows its unit and zone and
// the window holding now, not a period of 0s.
func TestDebugTenantShowsACalendarWindow(t *testing.T) {
	g := NewWithT(t)
	srv := redistest.Start(t)
	cfg, err := config.Parse(policyConfig(t, "monthly", "shop", 1, 10))
	g.Expect(err).NotTo(HaveOccurred())
	cfg.Policies[0].Rules[0].Limits = []config.Limit{{Requests: 10000, Calendar: &config.Calendar{Unit: config.CalendarMonth, TimeZone: "Europe/Berlin"}}}
	b, err := json.Marshal(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = config.Parse(b)
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "config.json")
	g.Expect(os.WriteFile(path, b, 0o644)).To(Succeed())
	p := startAdminProgram(t, []string{"--policy-config", path}, []string{"REDIS_URL=" + srv.Addr()})
	g.Eventually(func() int { code, _ := p.get("/readyz", ""); return code }, 10*time.Second, 50*time.Millisecond).Should(Equal(http.StatusOK))

	code, body := p.get("/debug/tenant?domain=shop&entry=customer=acme", "")
	g.Expect(code).To(Equal(http.StatusOK), string(body))
	var r struct {
		Windows []map[string]any `json:"windows"`
	}
	g.Expect(json.Unmarshal(body, &r)).To(Succeed())
	g.Expect(r.Windows).To(HaveLen(1), string(body))
	w := r.Windows[0]
	g.Expect(w).NotTo(HaveKey("period"), string(body))
	g.Expect(w).To(HaveKeyWithValue("requests", 10000.0))
	g.Expect(w).To(HaveKeyWithValue("calendar", map[string]any{"unit": "Month", "timeZone": "Europe/Berlin"}))
	g.Expect(w).To(HaveKeyWithValue("current", HaveKeyWithValue("timeZone", "Europe/Berlin")))
}
