package rls

import (
	"sync"
	"sync/atomic"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluice-dev/sluice/enforcer/status"
)

// decisions count, per policy (domain), the calls it decided, as an
// enforcer counts the requests a policy applies to: /status reports them
// and the operator sums them into the policy's status.
type decisions struct {
	mu       sync.RWMutex
	byPolicy map[string]*policyCounts
}

type policyCounts struct {
	allowed, denied, wouldDeny, failureMode atomic.Int64
}

// callTally is what the descriptors of one call decided.
type callTally struct {
	// decided: a descriptor of the call was checked (given-back ones
	// aside).
	decided bool
	// shadowRefused: a shadow_mode rule or a DryRun domain would have
	// refused one.
	shadowRefused bool
	// degraded counts the descriptors the failure mode decided.
	degraded int64
}

func (c *callTally) add(outcome string, degraded bool) {
	if outcome == outcomeGivenBack {
		return
	}
	c.decided = true
	c.shadowRefused = c.shadowRefused || outcome == outcomeShadowOverLimit
	if degraded {
		c.degraded++
	}
}

// record counts one call of domain: denied when refused, wouldDeny when
// only a shadow refusal, else allowed; a call no rule of the domain
// checked counts for no policy.
func (s *Service) record(t *Table, domain string, code ratelimitv3.RateLimitResponse_Code, c callTally) {
	d := t.domain(domain)
	if d == nil || !c.decided {
		return
	}
	pc := s.decisions.policy(d.bucket.Policy)
	switch {
	case code == ratelimitv3.RateLimitResponse_OVER_LIMIT:
		pc.denied.Add(1)
	case c.shadowRefused:
		pc.wouldDeny.Add(1)
	default:
		pc.allowed.Add(1)
	}
	if c.degraded > 0 {
		pc.failureMode.Add(c.degraded)
	}
}

func (d *decisions) policy(name string) *policyCounts {
	d.mu.RLock()
	pc, ok := d.byPolicy[name]
	d.mu.RUnlock()
	if ok {
		return pc
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byPolicy == nil {
		d.byPolicy = map[string]*policyCounts{}
	}
	if pc, ok = d.byPolicy[name]; !ok {
		pc = &policyCounts{}
		d.byPolicy[name] = pc
	}
	return pc
}

// Decisions are the calls each policy decided since the service started,
// by policy name, as /status reports them (admin.DecisionSource).
func (s *Service) Decisions() map[string]status.DecisionCounts {
	s.decisions.mu.RLock()
	defer s.decisions.mu.RUnlock()
	out := make(map[string]status.DecisionCounts, len(s.decisions.byPolicy))
	for name, pc := range s.decisions.byPolicy {
		out[name] = status.DecisionCounts{Allowed: pc.allowed.Load(), Denied: pc.denied.Load(),
			WouldDeny: pc.wouldDeny.Load(), FailureMode: pc.failureMode.Load()}
	}
	return out
}
