package metrics

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/rules"
	"github.com/sluice-dev/sluice/enforcer/status"
)

func TestTopTenantsForgetAfterTwoWindows(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_800_000_000, 0)
	top := NewTopTenants()
	top.now = func() time.Time { return now }
	p := &rules.Policy{Name: "api"}
	r := &rules.Rule{Rule: &config.Rule{Name: "all"}}
	top.Tenant(p, r, "bob", 0)
	now = now.Add(topTenantsWindow + time.Second)
	top.Tenant(p, r, "carol", 0)
	g.Expect(top.Report()[0].Heaviest).To(HaveLen(2), "the last complete window and the current one")
	now = now.Add(topTenantsWindow)
	g.Expect(top.Report()[0].Heaviest).To(Equal([]status.TenantCount{{Tenant: "carol", Count: 1}}), "bob's window is past")
	now = now.Add(3 * topTenantsWindow)
	g.Expect(top.Report()).To(BeEmpty())
}

func TestJWTClaimTenantsAreHashed(t *testing.T) {
	g := NewWithT(t)
	g.Expect(tenantName("alice@example.com", true)).To(HavePrefix("sha256:"))
	g.Expect(tenantName("alice@example.com", true)).To(HaveLen(len("sha256:") + 64))
	g.Expect(tenantName("10.0.0.1", true)).To(Equal("10.0.0.1"))
	g.Expect(tenantName("acme", false)).To(Equal("acme"))
}

func TestTopTenantsOfAJWTRuleReportOnlyHashes(t *testing.T) {
	g := NewWithT(t)
	p := &rules.Policy{Name: "api"}
	r := &rules.Rule{Rule: &config.Rule{Name: "all", Identity: config.Identity{Sources: []config.Source{{JWTClaim: &config.JWTClaimSource{}}}}}}
	top := NewTopTenants()
	long := strings.Repeat("x", 2*maxTenantName)
	for range 3 {
		top.Tenant(p, r, "alice@example.com", engine.Denied)
	}
	top.Tenant(p, r, long, engine.Allowed)
	top.Tenant(p, r, "10.0.0.1", engine.Allowed)
	report := top.Report()
	g.Expect(report).To(HaveLen(1))
	g.Expect(report[0].Heaviest).To(ConsistOf(
		status.TenantCount{Tenant: tenantName("alice@example.com", true), Count: 3},
		status.TenantCount{Tenant: tenantName(long, true), Count: 1},
		status.TenantCount{Tenant: "10.0.0.1", Count: 1},
	))
	g.Expect(report[0].Refused).To(Equal([]status.TenantCount{{Tenant: tenantName("alice@example.com", true), Count: 3}}))
	body, err := json.Marshal(report)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(body)).NotTo(ContainSubstring("alice"))
}
