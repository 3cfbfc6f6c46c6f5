package rls

import (
	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// Lookup is what one hit of a descriptor would be decided by: its rule,
// the limiter's request for it (bucket, windows, ban) and the backend
// that decides it. It is what /debug/tenant reads, counting nothing.
type Lookup struct {
	Domain string
	// Policy is the domain's policy, "" for a domain of a file.
	Policy string
	// Rule is nil when no rule matches: the descriptor is admitted.
	Rule *Rule
	// Tenant is the value of the entry that names the tenant, "" for a
	// bucket shared by the rule or named by all the entries.
	Tenant string
	// Override says the tenant has limits of its own.
	Override bool
	// DryRun is set for a policy in DryRun mode.
	DryRun  bool
	Request limiter.Request
	Backend *Backend
}

// Lookup finds the rule a descriptor of domain matches, as a call would,
// and builds the request of one hit of it. ok is false when the service
// has no such domain.
func (s *Service) Lookup(domain string, entries []*ratelimitv3common.RateLimitDescriptor_Entry) (l Lookup, ok bool) {
	t := s.table.Load()
	d := t.domain(domain)
	if d == nil {
		return Lookup{}, false
	}
	l = Lookup{Domain: domain, Policy: d.policy, DryRun: d.dryRun, Backend: s.backendOf(d)}
	r := t.Match(domain, entries)
	if r == nil {
		return l, true
	}
	l.Rule = r
	if r.Unlimited || r.zero != nil {
		return l, true
	}
	l.Tenant, _ = r.tenant(entries)
	_, l.Override = r.overrides[l.Tenant]
	l.Override = l.Override && l.Tenant != ""
	l.Request = r.Request(entries, 1)
	return l, true
}

// ZeroLimit says the rule admits nothing: a limit of 0 requests per unit,
// decided without Redis.
func (r *Rule) ZeroLimit() bool { return r.zero != nil }
