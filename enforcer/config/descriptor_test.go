package config

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// domainConfig is a valid configuration with one domain policy.
func domainConfig() *Config {
	descriptor := Identity{Sources: []Source{{Descriptor: &DescriptorSource{}}}}
	return &Config{Schema: Schema, Namespace: "ratelimit", Policies: []Policy{{
		Name: "shop", Domain: "shop", Mode: ModeEnforce, FailureMode: FailOpen, ResponseHeaders: HeadersNone,
		Timeout: Duration{50 * time.Millisecond}, Replicas: 1, Salt: "erl:shop",
		Rules: []Rule{
			{Name: "user", Match: Match{Descriptor: []DescriptorEntry{{Key: "user"}}}, Algorithm: FixedWindow, Cost: 1,
				Identity: descriptor, Limits: []Limit{{Requests: 5, Period: Duration{time.Minute}}}, LimitName: "per-user"},
			{Name: "pdf", Match: Match{Descriptor: []DescriptorEntry{{Key: "path", Value: "*.pdf", Shared: true}}}, Algorithm: FixedWindow, Cost: 1,
				Identity: descriptor, Limits: []Limit{{Requests: 5, Period: Duration{time.Minute}}}, Replaces: []string{"per-user"}, Shadow: true},
			{Name: "free", Match: Match{Descriptor: []DescriptorEntry{{Key: "free"}}}, Exempt: true},
		},
	}}}
}

func TestDomainPoliciesAreValidated(t *testing.T) {
	g := NewWithT(t)
	g.Expect(domainConfig().Validate()).To(Succeed())

	cases := map[string]struct {
		edit func(c *Config)
		want string
	}{
		"no path": {func(c *Config) { c.Policies[0].Rules[0].Match.Descriptor = nil },
			"policies[0](shop).rules[0](user).match.descriptor: a rule of a policy with a domain needs a descriptor path"},
		"empty key": {func(c *Config) { c.Policies[0].Rules[0].Match.Descriptor[0].Key = "" },
			"rules[0](user).match.descriptor[0].key: must not be empty"},
		"http match": {func(c *Config) { c.Policies[0].Rules[0].Match.Paths = []PathMatch{{Prefix: "/"}} },
			"rules[0](user).match: a rule of a policy with a domain matches descriptors, not hosts"},
		"shared without wildcard": {func(c *Config) { c.Policies[0].Rules[0].Match.Descriptor[0].Shared = true },
			"rules[0](user).match.descriptor[0].shared: only a wildcard value"},
		"same path": {func(c *Config) { c.Policies[0].Rules[1].Match.Descriptor = []DescriptorEntry{{Key: "user"}} },
			"rules[1](pdf).match.descriptor: the same path as rules[0](user)"},
		"replaces itself": {func(c *Config) { c.Policies[0].Rules[0].Replaces = []string{"per-user"} },
			`rules[0](user).replaces[0]: a rule cannot replace its own limit "per-user"`},
		"header identity": {func(c *Config) {
			c.Policies[0].Rules[0].Identity = Identity{Sources: []Source{{Header: &HeaderSource{Name: "X"}}}}
		}, "rules[0](user).identity.sources[0]: a rule of a policy with a domain is named by descriptor or shared sources"},
		"tiers from a header": {func(c *Config) {
			c.Policies[0].Tiers = &Tiers{Source: Source{Header: &HeaderSource{Name: "X"}}, Default: "f"}
		},
			"policies[0](shop).tiers.source: a policy with a domain reads the tier from a descriptor entry"},
		"tiers from a descriptor without a key": {func(c *Config) {
			c.Policies[0].Tiers = &Tiers{Source: Source{Descriptor: &DescriptorSource{}}, Default: "f"}
		},
			"policies[0](shop).tiers.source: a policy with a domain reads the tier from a descriptor entry"},
		"tiers from a descriptor outside a domain": {func(c *Config) {
			c.Policies[0].Domain = ""
			c.Policies[0].Tiers = &Tiers{Source: Source{Descriptor: &DescriptorSource{Key: "plan"}}, Default: "f"}
		},
			"policies[0](shop).tiers.source: must be exactly one of header or jwtClaim"},
		"overrides without a named tenant": {func(c *Config) {
			c.Policies[0].Rules[0].Overrides = []Override{{Tenant: "acme", Limits: []Limit{{Requests: 50, Period: Duration{time.Minute}}}}}
		}, "rules[0](user).overrides: an override names a tenant, and no identity source of the rule names one"},
		"identity key outside the path": {func(c *Config) {
			c.Policies[0].Rules[0].Identity = Identity{Sources: []Source{{Descriptor: &DescriptorSource{Key: "tenant"}}}}
		}, `rules[0](user).identity.sources[0].descriptor.key: "tenant" is no key of the rule's descriptor path`},
		"delay": {func(c *Config) {
			c.Policies[0].Rules[0].OnLimit = &OnLimit{Delay: &Delay{Max: Duration{time.Second}, MaxQueued: 1}}
		}, "rules[0](user): a rule of a policy with a domain has no onLimit or adaptive"},
		"two policies of a domain": {func(c *Config) {
			p := c.Policies[0]
			p.Name = "shop2"
			c.Policies = append(c.Policies, p)
		}, `policies[1](shop2).domain: domain "shop" is also the domain of policy shop`},
		"descriptor outside a domain": {func(c *Config) { c.Policies[0].Domain = "" },
			"rules[0](user).match.descriptor: only a policy with a domain matches descriptors"},
		"descriptor source outside a domain": {func(c *Config) {
			c.Policies[0].Domain = ""
			c.Policies[0].Rules = c.Policies[0].Rules[:1]
			c.Policies[0].Rules[0].Match = Match{}
			c.Policies[0].Rules[0].LimitName = ""
		}, "rules[0](user).identity.sources[0]: only a rule of a policy with a domain is named by its descriptor"},
		"shadow outside a domain": {func(c *Config) { c.Policies[0].Domain = "" },
			"rules[1](pdf): limitName, replaces and shadow are for rules of a policy with a domain"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := domainConfig()
			tc.edit(c)
			g.Expect(c.Validate()).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

// A domain policy has what a sidecar policy has but delays and adaptive
// limits: tiers read from an entry, overrides of a tenant an entry names,
// bans.
func TestDomainPoliciesHaveTiersOverridesAndBans(t *testing.T) {
	g := NewWithT(t)
	c := domainConfig()
	p := &c.Policies[0]
	p.Tiers = &Tiers{Source: Source{Descriptor: &DescriptorSource{Key: "plan"}}, Default: "free"}
	r := &p.Rules[0]
	r.Identity = Identity{Sources: []Source{{Descriptor: &DescriptorSource{Key: "user"}}, {Shared: &struct{}{}}}}
	r.Match.Descriptor = append(r.Match.Descriptor, DescriptorEntry{Key: "plan"})
	r.TierLimits = map[string][]Limit{"free": r.Limits, "gold": {{Requests: 50, Period: Duration{time.Minute}}}}
	r.Overrides = []Override{{Tenant: "acme", Limits: []Limit{{Requests: 500, Period: Duration{time.Minute}}}}}
	r.Ban = &Ban{Denials: 3, Within: Duration{time.Minute}, Durations: []Duration{{time.Hour}}, ForgetAfter: Duration{24 * time.Hour}}
	g.Expect(c.Validate()).To(Succeed())
}
