package limiter

import (
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// DefaultTimeout is the Redis budget of one decision when a policy sets none.
const DefaultTimeout = 50 * time.Millisecond

// FailurePolicy is a policy's answer to a Redis failure.
type FailurePolicy struct {
	Mode config.FailureMode
	// Timeout is the Redis budget of one decision; zero means DefaultTimeout.
	Timeout time.Duration
	// Replicas is the number of enforcers sharing the limit (at least 1);
	// LocalFallback gives each of them 1/Replicas of every window.
	Replicas int
	// Replicated counts a decision only once a Redis replica has it too
	// (WAIT, within Timeout): a count no replica acknowledged in time is a
	// Redis failure, which Mode decides (replicated.go).
	Replicated bool
}

// FailureOf is the failure policy of a compiled policy: its failure mode,
// timeout, replicas and consistency.
func FailureOf(p *config.Policy) FailurePolicy {
	return FailurePolicy{Mode: p.FailureMode, Timeout: p.Timeout.Duration, Replicas: max(1, int(p.Replicas)),
		Replicated: p.Consistency == config.ConsistencyReplicated}
}

func (p FailurePolicy) timeout() time.Duration {
	if p.Timeout <= 0 {
		return DefaultTimeout
	}
	return p.Timeout
}

// share is the window a single replica enforces on its own: the limit
// divided among the replicas, rounded up, and never below the request's
// cost so a costly request can still pass somewhere.
func (p FailurePolicy) share(w Window, cost int64) Window {
	n := int64(max(p.Replicas, 1))
	div := func(v int64) int64 {
		if v == 0 {
			return 0
		}
		return max((v+n-1)/n, cost)
	}
	return Window{Requests: div(w.Requests), Period: w.Period, Burst: div(w.Burst), Calendar: w.Calendar}
}
