package rules

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/identity"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// Rule is a compiled config.Rule: the rule as configured, and what
// matching and deciding it need, built once. It never changes; an adaptive
// rule's factor and meter are its table's (Scaling).
type Rule struct {
	*config.Rule
	// DelayMaxQueued is how many of one tenant's requests may wait for
	// booked capacity at once in this enforcer; zero without onLimit.delay.
	DelayMaxQueued int

	match    matcher
	identity *identity.Resolver
	// The limiter's rules, built and checked once: the untiered limits,
	// per tier, per tenant.
	limits    limiter.Rule
	perTier   map[string]limiter.Rule
	overrides map[string]limiter.Rule
	// scaling is 1 + the index of the rule's Scaling in its table, 0 for a
	// rule that is not adaptive.
	scaling int
}

// compiledIdentity lets the rules of a policy that share an identity share
// its resolver, and so its resolution within a request.
type compiledIdentity struct {
	cfg      config.Identity
	resolver *identity.Resolver
}

func compileRule(b bucketOf, cr *config.Rule, resolvers *[]compiledIdentity) (*Rule, error) {
	m, err := compileMatch(cr.Match, !cr.Exempt)
	if err != nil {
		return nil, err
	}
	r := &Rule{Rule: cr, match: m}
	if r.Exempt {
		return r, nil
	}
	if cr.DelayMax() > 0 {
		r.DelayMaxQueued = int(cr.OnLimit.Delay.MaxQueued)
	}
	for _, c := range *resolvers {
		if reflect.DeepEqual(c.cfg, cr.Identity) {
			r.identity = c.resolver
			break
		}
	}
	if r.identity == nil {
		if r.identity, err = identity.New(cr.Identity); err != nil {
			return nil, err
		}
		*resolvers = append(*resolvers, compiledIdentity{cfg: cr.Identity, resolver: r.identity})
	}
	if r.limits, err = b.rule(cr.Limits, r, config.Full); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	if len(cr.TierLimits) > 0 {
		r.perTier = make(map[string]limiter.Rule, len(cr.TierLimits))
		for tier, limits := range cr.TierLimits {
			if r.perTier[tier], err = b.rule(limits, r, config.Full); err != nil {
				return nil, fmt.Errorf("tier %s: %w", tier, err)
			}
		}
	}
	if len(cr.Overrides) > 0 {
		r.overrides = make(map[string]limiter.Rule, len(cr.Overrides))
		for _, o := range cr.Overrides {
			w, err := b.rule(o.Limits, r, config.Full)
			if err != nil {
				return nil, fmt.Errorf("override %s: %w", o.Tenant, err)
			}
			addOverride(r.overrides, o.Tenant, w)
		}
	}
	return r, nil
}

// bucketOf names the buckets of one policy's rules and their failure mode.
type bucketOf struct {
	namespace, policy string
	failure           limiter.FailurePolicy
}

// rule is the limiter's rule of r under limits scaled by factor, built
// once per configuration (and factor); NewRule checks what config.Parse
// already did, off the request path.
func (b bucketOf) rule(limits []config.Limit, r *Rule, factor config.BasisPoints) (limiter.Rule, error) {
	ws := limiter.ScaleWindows(r.Algorithm, limiter.WindowsOf(limits), r.Cost, factor)
	return limiter.NewRule(limiter.Bucket{Namespace: b.namespace, Policy: b.policy, Rule: r.Name}, r.Rule, ws, b.failure)
}

// windows are r's windows for a tenant (as overrides name it) of a tier,
// and whether they are the tenant's override: scaled by the factor in
// force when r is adaptive.
func (t *Table) windows(r *Rule, tier, tenant string) (limiter.Rule, bool) {
	if s := t.Scaling(r); s != nil {
		if w, override, ok := s.scaledWindows(tier, tenant); ok {
			return w, override
		}
	}
	if w, ok := r.overrides[tenant]; ok {
		return w, true
	}
	if w, ok := r.perTier[tier]; ok {
		return w, false
	}
	return r.limits, false
}

// addOverride keys an override's windows by its tenant as written and, when
// that differs, as identity resolves it (canonicalTenant), unless another
// override names that form itself.
func addOverride(m map[string]limiter.Rule, tenant string, w limiter.Rule) {
	m[tenant] = w
	if canonical := canonicalTenant(tenant); canonical != tenant {
		if _, ok := m[canonical]; !ok {
			m[canonical] = w
		}
	}
}

// canonicalTenant is an override's tenant as identity resolves it, so that
// an override written "2001:DB8::1" or "sha256:ABC..." still applies: an
// IP address in its canonical form, an API key hash in lower case.
func canonicalTenant(tenant string) string {
	if addr, err := netip.ParseAddr(tenant); err == nil {
		return addr.Unmap().WithZone("").String()
	}
	if hash, ok := strings.CutPrefix(tenant, "sha256:"); ok {
		return "sha256:" + strings.ToLower(hash)
	}
	return tenant
}
