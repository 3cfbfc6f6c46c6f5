package rules

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// A policy with a domain is the rate limit service's: the proxy's table
// leaves it out, so its rules, which match descriptors, never match HTTP
// requests.
func TestPoliciesWithADomainAreNotTheProxys(t *testing.T) {
	g := NewWithT(t)
	c, err := config.Load("../config/testdata/shop.json")
	g.Expect(err).NotTo(HaveOccurred())
	c = c.ForPod(map[string]string{"app": "api", "tier": "admin"})
	http := len(c.Policies)
	c.Policies = append([]config.Policy{{
		Name: "edge", Domain: "edge", Mode: config.ModeEnforce, FailureMode: config.FailOpen, ResponseHeaders: config.HeadersNone,
		Timeout: config.Duration{Duration: 50 * time.Millisecond}, Salt: "s", TrustedProxies: []string{"192.0.2.0/24"},
		Rules: []config.Rule{{Name: "user", Match: config.Match{Descriptor: []config.DescriptorEntry{{Key: "user"}}},
			Algorithm: config.FixedWindow, Cost: 1, Identity: config.Identity{Sources: []config.Source{{Descriptor: &config.DescriptorSource{}}}},
			Limits: []config.Limit{{Requests: 1, Period: config.Duration{Duration: time.Second}}}}},
	}}, c.Policies...)
	table, err := New(c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(table.Policies()).To(HaveLen(http))
	for _, p := range table.Policies() {
		g.Expect(p.Name).NotTo(Equal("edge"))
	}
}
