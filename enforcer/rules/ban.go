package rules

import (
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// BanRule is the limited rule named rule of policy, when it has a ban,
// with the limiter's rule that names its buckets: Request(tenant) is that
// tenant's bucket, whose ban the limiter can read or lift.
func (t *Table) BanRule(policy, rule string) (*Policy, *Rule, limiter.Rule, bool) {
	for _, p := range t.Policies() {
		if p.Name != policy {
			continue
		}
		for _, r := range p.limited {
			if r.Name == rule && r.Ban != nil {
				return p, r, r.limits, true
			}
		}
	}
	return nil, nil, limiter.Rule{}, false
}

// Limited are the rules of p that limit requests, in configuration order.
func (p *Policy) Limited() []*Rule { return p.limited }
