package engine

import (
	"time"

	"github.com/sluice-dev/sluice/enforcer/rules"
)

// Verdict is what a rule, or a policy, decided for one request.
type Verdict uint8

const (
	// Allowed: the request fits.
	Allowed Verdict = iota
	// Denied: the request was refused (an Enforce policy).
	Denied
	// WouldDeny: a DryRun policy would have refused the request.
	WouldDeny
	// Banned: the request was refused because its tenant is banned from
	// the rule (an Enforce policy).
	Banned
)

func (v Verdict) String() string {
	switch v {
	case Denied:
		return "denied"
	case WouldDeny:
		return "would_deny"
	case Banned:
		return "banned"
	}
	return "allowed"
}

// Recorder is told what is decided, for metrics and /status. It is
// called on the request path: implementations must be fast and safe for
// concurrent use, and must not keep tenant identities.
type Recorder interface {
	// Check records the decision of one rule.
	Check(p *rules.Policy, r *rules.Rule, tier string, v Verdict)
	// Policy records the decision of one policy (the worst of its rules)
	// on one request.
	Policy(p *rules.Policy, v Verdict)
	// Degraded records a decision made by a policy's failure mode because
	// Redis did not answer.
	Degraded(p *rules.Policy)
	// RedisRoundTrip records how long one batch of decisions took in Redis.
	RedisRoundTrip(be *Backend, d time.Duration)
	// CheckError records a check that could not be decided at all; the
	// request goes on.
	CheckError(p *rules.Policy, err error)
	// UpstreamError records a request the application did not answer.
	UpstreamError()
	// Refused records a request refused before any rule was checked, with
	// a fixed reason (request.Error.Reason, or a size or time limit).
	Refused(reason string)
}

// NopRecorder records nothing.
type NopRecorder struct{}

func (NopRecorder) Check(*rules.Policy, *rules.Rule, string, Verdict) {}
func (NopRecorder) Policy(*rules.Policy, Verdict)                     {}
func (NopRecorder) Degraded(*rules.Policy)                            {}
func (NopRecorder) RedisRoundTrip(*Backend, time.Duration)            {}
func (NopRecorder) CheckError(*rules.Policy, error)                   {}
func (NopRecorder) UpstreamError()                                    {}
func (NopRecorder) Refused(string)                                    {}

// DelayRecorder is told about delayed requests; a Recorder that implements
// it gets the calls.
type DelayRecorder interface {
	// Delayed records a request that waited for its reservation.
	Delayed(p *rules.Policy, r *rules.Rule, wait time.Duration)
	// DelayCancelled records a wait whose client hung up, or whose gRPC
	// deadline ended first: its reservation was given back.
	DelayCancelled(p *rules.Policy, r *rules.Rule)
	// DelayQueueFull records a request decided without its delay because
	// a bound was full: scope is "tenant" or "enforcer".
	DelayQueueFull(p *rules.Policy, r *rules.Rule, scope string)
	// DelayQueueLength records the requests holding a queue place now.
	DelayQueueLength(n int)
}
