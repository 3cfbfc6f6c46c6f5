package rls

import (
	"fmt"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// overrideRule names, in Redis keys and metrics, the limit override of a
// descriptor no rule matches. No compiled rule has this name: rule names
// escape '%' (erl.escape).
const overrideRule = "%override"

// Override is the rule deciding a descriptor of domain that carries a
// limit override (RateLimitDescriptor.limit), matched is the rule the
// descriptor matches, nil when none. It answers as envoyproxy/ratelimit
// does (src/config/config_impl.go, GetLimit; src/limiter/cache_key.go):
//
//   - the override replaces whatever the configuration says of the
//     descriptor, an unlimited or shadow_mode rule included, and applies
//     to a descriptor no rule matches; in a domain the configuration does
//     not have, no limit applies (nil);
//   - it has no name: it replaces no other limit and none replaces it;
//   - it counts in a fixed window of its unit, in the bucket of the
//     descriptor's entries (their own values, even those a shared wildcard
//     matched):
//     the override's requests_per_unit is not part of the key, so a call
//     with the rule's own limit of the same unit, or another override of
//     that unit, counts in the same window;
//   - 0 requests per unit refuses every hit.
//
// A unit that is not one of envoy.type.v3.RateLimitUnit's (UNKNOWN
// included) is an error: envoyproxy/ratelimit panics on it.
func (t *Table) Override(domain string, matched *Rule, o *ratelimitv3common.RateLimitDescriptor_RateLimitOverride) (*Rule, error) {
	d := t.domain(domain)
	if d == nil {
		return nil, nil
	}
	// A route's override comes back on every call: the rule is built once
	// per table (the table is replaced with the configuration), for at most
	// maxCachedOverrides distinct ones.
	k := overrideKey{domain: d, matched: matched, unit: ratelimitv3.RateLimitResponse_RateLimit_Unit(o.GetUnit()), requests: o.GetRequestsPerUnit()}
	if r, ok := t.overrides.Load(k); ok {
		return r.(*Rule), nil
	}
	r, err := d.override(matched, o)
	if err == nil && t.cachedOverrides.Add(1) <= maxCachedOverrides {
		t.overrides.Store(k, r)
	}
	return r, err
}

// maxCachedOverrides bounds the override rules a table keeps; beyond it,
// each call builds its own.
const maxCachedOverrides = 1024

// overrideKey is what an override rule is built from.
type overrideKey struct {
	domain   *domain
	matched  *Rule
	unit     ratelimitv3.RateLimitResponse_RateLimit_Unit
	requests uint32
}

// override builds the rule of an override of d's descriptor, matched by
// matched (nil: no rule).
func (d *domain) override(matched *Rule, o *ratelimitv3common.RateLimitDescriptor_RateLimitOverride) (*Rule, error) {
	period, ok := unitPeriod(ratelimitv3.RateLimitResponse_RateLimit_Unit(o.GetUnit()))
	if !ok {
		return nil, fmt.Errorf("unit %s is not a unit of time", o.GetUnit())
	}
	// A descriptor's bucket is named by its entries, as envoyproxy/ratelimit
	// keys a counter.
	r := &Rule{Name: overrideRule, domain: d, salt: d.salt, sources: []config.Source{{Descriptor: &config.DescriptorSource{}}}}
	if matched != nil {
		// the rule's own bucket: its fixed window of the same period is
		// the same Redis key, as envoyproxy/ratelimit's is
		r.Name, r.sources = matched.Name, matched.sources
	}
	if o.GetRequestsPerUnit() == 0 {
		r.zero = []limiter.Window{{Period: period}}
		return r, nil
	}
	b := d.bucket
	b.Rule = r.Name
	cr := &config.Rule{Name: r.Name, Algorithm: config.FixedWindow, Cost: 1, Leasing: config.LeasingOff}
	var err error
	r.limits, err = limiter.NewRule(b, cr, []limiter.Window{{Requests: int64(o.GetRequestsPerUnit()), Period: period}}, d.failure)
	if err != nil {
		return nil, fmt.Errorf("limit override: %w", err)
	}
	return r, nil
}

// unitPeriod is the length of u, as envoyproxy/ratelimit counts it.
func unitPeriod(u ratelimitv3.RateLimitResponse_RateLimit_Unit) (time.Duration, bool) {
	for _, x := range units {
		if x.unit == u {
			return x.period, true
		}
	}
	return 0, false
}

// zeroDecision answers a hit of an override of 0 requests per unit,
// without asking Redis: refused until its window ends; a call that counts
// nothing (hits 0, or negative hits) is admitted with nothing remaining.
func zeroDecision(r *Rule, refuse bool) limiter.Decision {
	now := time.Now()
	w := r.zero[0]
	p := w.Period.Microseconds()
	end := time.UnixMicro((now.UnixMicro()/p + 1) * p) // fixed windows start at multiples of the period
	d := limiter.Decision{Allowed: !refuse, Period: w.Period, Reset: end, Now: now}
	if refuse {
		d.RetryAfter = end.Sub(now)
	}
	return d
}
