package rls

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// tenantTable is a domain whose rule names its tenant by the user entry,
// with tiers from the plan entry and an override.
func tenantTable(t *testing.T) *Table {
	t.Helper()
	limit := func(n int64) []config.Limit {
		return []config.Limit{{Requests: n, Period: config.Duration{Duration: time.Minute}}}
	}
	cfg := &config.Config{Schema: config.Schema, Namespace: "shop", Policies: []config.Policy{{
		Name: "edge", Domain: "edge", Mode: config.ModeEnforce, FailureMode: config.FailOpen, ResponseHeaders: config.HeadersNone,
		Timeout: config.Duration{Duration: 50 * time.Millisecond}, Replicas: 1, Salt: "s",
		Tiers: &config.Tiers{Source: config.Source{Descriptor: &config.DescriptorSource{Key: "plan"}}, Default: "free"},
		Rules: []config.Rule{
			{Name: "user", Match: config.Match{Descriptor: []config.DescriptorEntry{{Key: "generic_key"}, {Key: "user"}, {Key: "plan"}}},
				Algorithm: config.FixedWindow, Cost: 1,
				Identity:   config.Identity{Sources: []config.Source{{Descriptor: &config.DescriptorSource{Key: "user"}}}},
				Limits:     limit(1),
				TierLimits: map[string][]config.Limit{"free": limit(1), "gold": limit(2)},
				Overrides:  []config.Override{{Tenant: "acme", Limits: limit(3)}}},
		},
	}}}
	tab, err := NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func TestTenantIsTheEntryTheIdentityNames(t *testing.T) {
	g := NewWithT(t)
	tab := tenantTable(t)
	tenant := func(kv ...string) string {
		e := entries(kv...)
		return string(tab.Match("edge", e).Tenant(e))
	}
	g.Expect(tenant("generic_key", "a", "user", "u1", "plan", "gold")).To(Equal(tenant("generic_key", "b", "user", "u1", "plan", "free")),
		"only the user entry names the tenant")
	g.Expect(tenant("generic_key", "a", "user", "u1", "plan", "gold")).NotTo(Equal(tenant("generic_key", "a", "user", "u2", "plan", "gold")))
}

func TestWindowsAreTheOverridesElseTheTiers(t *testing.T) {
	g := NewWithT(t)
	tab := tenantTable(t)
	requests := func(kv ...string) int64 {
		e := entries(kv...)
		return tab.Match("edge", e).Request(e, 1).Windows[0].Requests
	}
	g.Expect(requests("generic_key", "a", "user", "u1", "plan", "gold")).To(BeEquivalentTo(2))
	g.Expect(requests("generic_key", "a", "user", "u1", "plan", "free")).To(BeEquivalentTo(1))
	g.Expect(requests("generic_key", "a", "user", "u1", "plan", "bronze")).To(BeEquivalentTo(1), "a tier no limit names: the rule's limits")
	g.Expect(requests("generic_key", "a", "user", "acme", "plan", "gold")).To(BeEquivalentTo(3), "an override, whatever the tier")
}
