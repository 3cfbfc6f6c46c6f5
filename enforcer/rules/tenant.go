package rules

import (
	"github.com/sluice-dev/sluice/enforcer/identity"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/request"
)

// TenantRequest is what /debug/tenant knows of a request of one tenant:
// the tenant as overrides name it, and as much of the request as the
// caller gave.
type TenantRequest struct {
	// Policy and Rule, when not empty, keep that policy's or rule's
	// checks only.
	Policy, Rule string
	// Tenant is the value the policy's identity yields for the tenant;
	// empty when no source yields one.
	Tenant string
	// Method, Host and Path choose the rules as Checks does; one left
	// empty matches whatever a rule asks of it. Host is lower case.
	Method, Host, Path string
	// Header names the tier, as the request's would.
	Header map[string][]string
	// Tier, when not empty, is the tier named instead of the header's.
	Tier string
}

// TenantMatch is one check Checks would make for a TenantRequest.
type TenantMatch struct {
	Check
	// Override reports whether the windows are the tenant's own.
	Override bool
	// TierChoice says how Tier was found: zero without tiers, without a
	// Source when TenantRequest.Tier named it.
	TierChoice identity.TierChoice
}

// Exemption is an exempt rule that lets a TenantRequest through its
// policy unlimited.
type Exemption struct {
	Policy, Rule string
}

// TenantChecks are the checks Checks makes for q's requests, with the same
// buckets, tiers and windows, grouped by policy in configuration order, and
// the exempt rules that let q through their policy. An exempt rule counts
// only when q gives everything it matches on: without a path, /healthz's
// exemption is not assumed.
func (t *Table) TenantChecks(q TenantRequest) ([]TenantMatch, []Exemption) {
	r := request.Known(q.Method, q.Host, q.Path, q.Header)
	given := givenParts{method: q.Method != "", host: q.Host != "", path: q.Path != ""}
	var out []TenantMatch
	var exempt []Exemption
	for _, p := range t.Policies() {
		if q.Policy != "" && p.Name != q.Policy {
			continue
		}
		if rule := p.exemptRule(&r, given); rule != nil && q.Rule == "" {
			exempt = append(exempt, Exemption{Policy: p.Name, Rule: rule.Name})
			continue
		}
		choice := p.tiers.Choose(&r)
		if q.Tier != "" {
			choice = p.tiers.ChooseNamed(q.Tier)
		}
		for _, rule := range p.limited {
			if q.Rule != "" && rule.Name != q.Rule || q.Rule == "" && !given.matches(&rule.match, &r, r.FoldedPath) {
				continue
			}
			id := rule.identity.Identify(q.Tenant, q.Method, r.PartitionPath(), r.Host)
			limits, override := t.windows(rule, choice.Tier, id.Name())
			out = append(out, TenantMatch{Check: t.check(p, rule, choice.Tier, limiter.HashTenant(p.salt, id.Key), limits),
				Override: override, TierChoice: choice})
		}
	}
	return out, exempt
}

// givenParts says which parts of a TenantRequest were given.
type givenParts struct{ method, host, path bool }

// matches is m.matches for the parts given; the others match.
func (g givenParts) matches(m *matcher, r *request.Request, path string) bool {
	return (!g.host || m.matchesHost(r.Host)) && (!g.method || m.matchesMethod(r)) && (!g.path || m.matchesPath(path))
}

// exemptRule is the exempt rule of p that matches r on parts all given.
func (p *Policy) exemptRule(r *request.Request, g givenParts) *Rule {
	for _, rule := range p.exempt {
		m := &rule.match
		if (len(m.hosts) == 0 || g.host) && (len(m.methods) == 0 || g.method) && (len(m.paths) == 0 || g.path) &&
			m.matches(r, r.Path) {
			return rule
		}
	}
	return nil
}
