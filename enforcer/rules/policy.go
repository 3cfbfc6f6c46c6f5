package rules

import (
	"fmt"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/identity"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/request"
)

// Policy is a compiled config.Policy: what the proxy needs to act on its
// checks, report them and answer /status.
type Policy struct {
	Name       string
	UID        string
	Generation int64
	// DryRun policies decide and count but never refuse a request.
	DryRun bool
	// XRateLimitHeaders and IETFHeaders say which families of rate limit
	// headers the policy's responseHeaders asks for.
	XRateLimitHeaders, IETFHeaders bool
	// RedisURLEnv names the environment variable holding the policy's
	// Redis URL; empty means the enforcer's default Redis.
	RedisURLEnv  string
	UpstreamPort int32
	Failure      limiter.FailurePolicy
	// Rules are every rule of the policy, exempt ones included, in
	// configuration order.
	Rules []*Rule

	salt    string
	tiers   *identity.TierResolver
	exempt  []*Rule
	limited []*Rule
}

func (t *Table) compilePolicy(namespace string, cp *config.Policy) (*Policy, error) {
	p := &Policy{
		Name:              cp.Name,
		UID:               cp.UID,
		Generation:        cp.Generation,
		DryRun:            cp.Mode == config.ModeDryRun,
		XRateLimitHeaders: cp.ResponseHeaders.XRateLimit(),
		IETFHeaders:       cp.ResponseHeaders.IETF(),
		RedisURLEnv:       cp.RedisURLEnv,
		UpstreamPort:      cp.UpstreamPort,
		Failure:           limiter.FailureOf(cp),
		salt:              cp.Salt,
	}
	b := bucketOf{namespace: namespace, policy: p.Name, failure: p.Failure}
	var resolvers []compiledIdentity
	var tiers []string
	for j := range cp.Rules {
		r, err := compileRule(b, &cp.Rules[j], &resolvers)
		if err != nil {
			return nil, fmt.Errorf("rule %s: %w", cp.Rules[j].Name, err)
		}
		if r.Adaptive != nil && !r.Exempt {
			t.scaling = append(t.scaling, newScaling(b, r))
			r.scaling = len(t.scaling)
		}
		p.Rules = append(p.Rules, r)
		if r.Exempt {
			p.exempt = append(p.exempt, r)
		} else {
			p.limited = append(p.limited, r)
		}
		for tier := range cp.Rules[j].TierLimits {
			tiers = append(tiers, tier)
		}
	}
	var err error
	if p.tiers, err = identity.NewTiers(cp.Tiers, tiers); err != nil {
		return nil, err
	}
	return p, nil
}

// exempts reports whether an exempt rule of p matches the request.
func (p *Policy) exempts(r *request.Request) bool {
	for _, rule := range p.exempt {
		if rule.match.matches(r, r.Path) {
			return true
		}
	}
	return false
}

// resolutions remember the identities resolved for one policy within one
// request, so that rules sharing an identity resolve and hash it once. It
// lives on the stack; past its capacity, identities are resolved again.
type resolutions struct {
	n    int
	done [8]struct {
		resolver *identity.Resolver
		id       identity.Identity
		tenant   limiter.Tenant
	}
}

func (rs *resolutions) resolve(r *request.Request, salt string, res *identity.Resolver) (identity.Identity, limiter.Tenant) {
	for i := range min(rs.n, len(rs.done)) {
		if d := &rs.done[i]; d.resolver == res {
			return d.id, d.tenant
		}
	}
	id := res.Resolve(r)
	tenant := limiter.HashTenant(salt, id.Key)
	if rs.n < len(rs.done) {
		rs.done[rs.n].resolver, rs.done[rs.n].id, rs.done[rs.n].tenant = res, id, tenant
	}
	rs.n++
	return id, tenant
}
