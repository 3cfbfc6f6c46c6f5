package config

import "fmt"

// MaxConcurrent bounds a Concurrency limit, as the API does.
const MaxConcurrent = 1_000_000

// validateConcurrent checks one set of limits of a Concurrency rule: one
// limit, Concurrent slots and nothing of a rate, at least the rule's cost.
func (r *Rule) validateConcurrent(path string, limits []Limit, add addFunc) {
	if len(limits) != 1 {
		add(path, "a Concurrency rule has exactly one limit (per tier and per override), got %d", len(limits))
	}
	for i, l := range limits {
		at := fmt.Sprintf("%s[%d]", path, i)
		if l.Requests != 0 || l.Period.Duration != 0 || l.Burst != 0 {
			add(at, "a Concurrency limit has concurrent only: remove requests, period and burst")
		}
		switch {
		case l.Concurrent < 1 || l.Concurrent > MaxConcurrent:
			add(at+".concurrent", "must be between 1 and %d, got %d", MaxConcurrent, l.Concurrent)
		case r.Cost > l.Concurrent:
			add(at, "cost %d exceeds concurrent %d, so no request could ever hold its slots", r.Cost, l.Concurrent)
		}
	}
}

// validateConcurrency checks what a Concurrency rule cannot be combined
// with: adaptive scaling, a delay (its requests do not wait for a slot),
// and a policy with a domain, whose service never sees a request end.
func (p *Policy) validateConcurrency(path string, add addFunc) {
	for j := range p.Rules {
		r := &p.Rules[j]
		if r.Exempt || r.Algorithm != Concurrency {
			continue
		}
		rpath := fmt.Sprintf("%s.rules[%d](%s)", path, j, r.Name)
		if r.Adaptive != nil {
			add(rpath+".adaptive", "rule %s uses Concurrency, which adaptive cannot scale: remove adaptive, or limit the rate with another algorithm", r.Name)
		}
		if p.Domain != "" {
			add(rpath+".algorithm", "a rule of a policy with a domain cannot use Concurrency: the rate limit service never sees when a request ends")
		}
	}
}
