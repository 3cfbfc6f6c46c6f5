// Package rules turns a request into the rate limit checks it must pass:
// which rules of which policies apply, whose bucket each one counts in and
// with which windows. It is the enforcer's hot path before Redis, so a
// Table is compiled once per configuration and matching parses nothing.
//
// Matching. A rule matches a request when its host, method and path lists
// each match (an empty list matches everything). The request is the
// canonical one of package request, which the application receives too:
//
//   - Host is the Host header without port or trailing dot, compared
//     case-insensitively; "*.example.com" matches any name below
//     example.com ("a.example.com", "a.b.example.com"), not example.com.
//   - Method is compared exactly; a rule naming GET also matches HEAD, and
//     a POST asking to be routed as another method (X-HTTP-Method-Override)
//     matches rules of either method.
//   - Path is the decoded, cleaned path. Limited rules compare it without
//     regard to case, so that a case change cannot walk around a limit of
//     an application that routes that way; exempt rules compare it exactly,
//     so that only the path they name is let through. Exact compares the
//     whole path; a limited rule's also matches with or without a trailing
//     slash ("/login/" for "/login", as Laravel, Express and Rails route),
//     an exempt rule's does not ("/healthz/" is not "/healthz"). Prefix matches
//     whole segments: "/v1" (or "/v1/") matches "/v1", "/v1/" and "/v1/x",
//     not "/v10". Glob: "*" is one segment, "**" any number of segments
//     including none ("/v1/exports/**" matches "/v1/exports"), "*" inside a
//     segment any characters of it ("/files/*.pdf"); a trailing slash of
//     the path is ignored.
//
// Semantics. Every matching rule of every policy applies, and the request
// passes only if each of their checks does. Within one policy, a matching
// exempt rule lets the request through that policy unlimited, whatever
// other rules of the policy match (an exempt /healthz rule next to a
// catch-all rule: /healthz is never limited by that policy); the other
// policies still apply.
//
// Windows. A check's windows are the rule's override for the tenant if it
// has one, else the rule's limits for the request's tier if it names that
// tier, else the rule's untiered limits. Overrides are matched on the
// tenant as identity resolves it (identity.Identity.Name: a header or claim
// value, a client IP address, "sha256:<hex>" of an API key, "anonymous"),
// before partitionBy appends the endpoint: an override names a tenant and
// covers each of its partitions. IP addresses and key hashes in overrides
// are compared in canonical form ("2001:DB8::1" is 2001:db8::1).
package rules

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/request"
)

// Check is one rule a request must pass.
type Check struct {
	Policy *Policy
	Rule   *Rule
	// Scaling is the rule's adaptive state, nil when it is not adaptive.
	Scaling *Scaling
	// Tier is the request's tier under the policy, "" when the policy has
	// no tiers; one of a bounded set, fit for a metrics label.
	Tier string
	// Request is what to ask the limiter. Its Windows are shared with every
	// other check of the same rule: do not modify them.
	Request limiter.Request
	// Tenant is the tenant as overrides name it (identity.Identity.Name):
	// client input, never a label or a log field.
	Tenant string
}

// Table is a compiled configuration: the policies an enforcer applies. It
// is immutable and safe for concurrent use.
type Table struct {
	namespace string
	policies  []*Policy
	canon     *request.Canonicalizer
	// scaling is the adaptive state of the adaptive rules, which name
	// theirs by index (Rule.scaling): the rules never change.
	scaling []*Scaling
}

// New compiles cfg, already reduced to the policies of this pod
// (config.Config.ForPod). It validates cfg again, so that a Table never
// holds a rule the limiter would refuse.
func New(cfg *config.Config) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("compile routes: %w", err)
	}
	t := &Table{namespace: cfg.Namespace}
	for i := range cfg.Policies {
		if cfg.Policies[i].Domain != "" {
			continue // the rate limit service's (cmd/ratelimit), not the proxy's
		}
		p, err := t.compilePolicy(cfg.Namespace, &cfg.Policies[i])
		if err != nil {
			return nil, fmt.Errorf("compile routes: policy %s: %w", cfg.Policies[i].Name, err)
		}
		t.policies = append(t.policies, p)
	}
	t.canon = t.canonicalizer(cfg)
	return t, nil
}

// canonicalizer checks the headers that any policy's identity or tiers
// read, and trusts the forwarding headers of every policy's trusted
// proxies, those of its clientIP sources included.
func (t *Table) canonicalizer(cfg *config.Config) *request.Canonicalizer {
	var headers []string
	var trusted []netip.Prefix
	for _, p := range t.policies {
		if h := p.tiers.Header(); h != "" {
			headers = append(headers, h)
		}
		for _, r := range p.limited {
			headers = append(headers, r.identity.Headers()...)
			trusted = append(trusted, r.identity.TrustedProxies()...)
		}
	}
	for i := range cfg.Policies {
		if cfg.Policies[i].Domain != "" {
			continue
		}
		// Validated: every entry parses.
		for _, cidr := range cfg.Policies[i].TrustedProxies {
			if prefix, err := netip.ParsePrefix(strings.TrimSpace(cidr)); err == nil {
				trusted = append(trusted, prefix.Masked())
			}
		}
	}
	return request.NewCanonicalizer(headers, trusted)
}

// Canonicalize rewrites r into the canonical request this configuration
// decides on, as request.Canonicalizer does; a nil Table checks no
// identity headers and trusts no proxy.
func (t *Table) Canonicalize(r *http.Request) (request.Request, error) {
	if t == nil || t.canon == nil {
		return noPolicies.Canonicalize(r)
	}
	return t.canon.Canonicalize(r)
}

var noPolicies = request.NewCanonicalizer(nil, nil)

// Policies are the compiled policies, in configuration order.
func (t *Table) Policies() []*Policy {
	if t == nil {
		return nil
	}
	return t.policies
}

// Checks appends to dst (which it reuses, to spare allocations) one Check
// per rule r must pass, grouped by policy in configuration order. No check
// means no limit applies. A nil Table has no checks.
func (t *Table) Checks(r *request.Request, dst []Check) []Check {
	if t == nil {
		return dst
	}
	for _, p := range t.policies {
		if p.exempts(r) {
			continue
		}
		var tier string
		var ids resolutions
		for _, rule := range p.limited {
			if !rule.match.matches(r, r.FoldedPath) {
				continue
			}
			if ids.n == 0 {
				tier = p.tiers.Tier(r)
			}
			id, tenant := ids.resolve(r, p.salt, rule.identity)
			limits, _ := t.windows(rule, tier, id.Name())
			dst = append(dst, t.check(p, rule, tier, tenant, limits))
			dst[len(dst)-1].Tenant = id.Name()
		}
	}
	return dst
}

func (t *Table) check(p *Policy, rule *Rule, tier string, tenant limiter.Tenant, limits limiter.Rule) Check {
	return Check{Policy: p, Rule: rule, Scaling: t.Scaling(rule), Tier: tier, Request: limits.Request(tenant)}
}

// TenantQuery names one tenant's bucket under one limited rule, as
// /debug/tenant asks for it.
type TenantQuery struct {
	Policy, Rule string
	// Tenant is the value the policy's identity yields for the tenant, as
	// overrides name it; empty when no source yields one.
	Tenant string
	// Tier is the tier the request names; unknown or empty is the default.
	Tier string
	// Method, Path (cleaned here) and Host choose the partition of a rule
	// with partitionBy.
	Method, Path, Host string
}

// TenantCheck is the check Checks makes for a request of q's tenant: the
// same bucket, tier and windows. override reports whether the windows are
// the tenant's own; ok is false when the policy or its limited rule is
// not in the table.
func (t *Table) TenantCheck(q TenantQuery) (c Check, override, ok bool) {
	for _, p := range t.Policies() {
		if p.Name != q.Policy {
			continue
		}
		for _, rule := range p.limited {
			if rule.Name != q.Rule {
				continue
			}
			tier := p.tiers.Named(q.Tier)
			req := request.Known(q.Method, q.Host, q.Path, nil)
			id := rule.identity.Identify(q.Tenant, q.Method, req.PartitionPath(), q.Host)
			limits, override := t.windows(rule, tier, id.Name())
			return t.check(p, rule, tier, limiter.HashTenant(p.salt, id.Key), limits), override, true
		}
	}
	return Check{}, false, false
}
