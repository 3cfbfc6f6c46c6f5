// Package limiter decides whether a request fits its rate limits.
//
// A decision is one atomic Lua call against Redis (Redis' TIME is the only
// clock), checking every window of a rule before committing any, so a request
// refused by one window consumes nothing from the others. When Redis cannot
// answer within the policy's budget, the policy's failure mode decides
// instead: fail open, fail closed, or fall back to an in-process limiter that
// enforces this replica's share of the limit.
package limiter

import (
	"github.com/sluice-dev/sluice/enforcer/config"

	"errors"
	"fmt"
	"time"
)

// Window is one limit of a rule: Requests per Period. A rule may carry
// several windows (100/min and 5000/day); a request must fit all of them.
type Window struct {
	Requests int64
	Period   time.Duration
	// Burst is the capacity of the algorithms that have one (TokenBucket,
	// GCRA);
	// zero means Requests. Other algorithms ignore it.
	Burst int64
	// Calendar, when set, makes this a calendar window (FixedWindow only,
	// calendar.go) instead of one of Period, which is zero.
	Calendar *config.Calendar
}

// capacity is the most a window of a can ever admit at once.
func (w Window) capacity(a Algorithm) int64 {
	return a.Capacity(config.Limit{Requests: w.Requests, Burst: w.Burst})
}

// Request asks whether Cost more requests of Bucket fit its Windows. A
// caller builds it from a Rule (Rule.Request: a tenant's bucket, the
// rule's cost; WithCost for another cost): what the rule does beyond its
// windows (leases, the denial cache, bans, calendar windows, delays, debt,
// slots) NewRule derived, and the guard reads it, no caller sets it.
type Request struct {
	Bucket    Bucket
	Algorithm Algorithm
	Windows   []Window
	// Cost is the weight of this request, at least 1.
	Cost int64
	// Failure says what to decide when Redis cannot answer.
	Failure FailurePolicy

	f features
}

// features are what NewRule derived from a rule beyond its windows: how
// the guard decides and settles its requests.
type features struct {
	// lease lets the guard admit from leases and refuse from its denial
	// cache (lease.go), for the algorithms that allow it exactly.
	lease bool
	// delay is the longest a request over the limit may wait for capacity
	// booked in Redis instead of being refused (onLimit.delay.max); zero
	// refuses it at once. TokenBucket and GCRA only (delay.go).
	delay time.Duration
	// ban, when set, bans tenants that keep hitting the rule (ban.go).
	ban *Ban
	// slotWait is, for a Concurrency rule with onLimit.delay, the longest
	// a request refused for want of a slot may wait for one of this
	// enforcer's (Admission.AwaitSlot), and slotQueue how many of the
	// tenant's requests may wait at once here; delay stays zero.
	slotWait  time.Duration
	slotQueue int

	// calendar is set when a window is a calendar window: the call
	// carries the windows' bounds (calendar.go).
	calendar bool
	// single is set by NewRule for a rule of one period window without
	// delay or ban: its decisions run the algorithm's single-window script.
	single bool
	// debts is set by NewRule for a rule whose answers report their cost
	// (responseCost): only those charges take a window below empty, so
	// only their decisions report a Debt. A lowered limit leaving more
	// counted than it allows is not one.
	debts bool

	// checked is set by Rule.Request: the request's rule passed NewRule and
	// its tenant is not empty. Guard.Decide refuses any other Request.
	checked bool
}

// Ban is the ban of the request's rule, nil when it bans no one.
func (req *Request) Ban() *Ban { return req.f.ban }

// MaxDelay is the longest the request may wait for capacity booked in
// Redis (onLimit.delay.max of a TokenBucket or GCRA rule), zero when
// refused at once.
func (req *Request) MaxDelay() time.Duration { return req.f.delay }

// SlotWait is the longest a request refused by the Concurrency rule may
// wait for a slot this enforcer gives back (its onLimit.delay.max); zero
// when it does not wait.
func (req *Request) SlotWait() time.Duration { return req.f.slotWait }

// SlotQueue is how many of a tenant's requests refused by the
// Concurrency rule may wait here for a slot at once.
func (req *Request) SlotQueue() int { return req.f.slotQueue }

// WithCost is req weighing cost instead of its rule's cost (an Envoy
// descriptor's hits_addend). Leases hold units for the rule's cost: a
// request of another cost is decided in Redis.
func (req Request) WithCost(cost int64) Request {
	if cost != req.Cost {
		req.Cost, req.f.lease = cost, false
	}
	return req
}

// Rule is a rule of a policy (config.Rule) as the limiter decides it under
// one set of windows: its bucket's namespace, policy and rule names, its
// algorithm, windows, cost, leasing, delay and ban, and its failure mode,
// precomputed into the Request every check copies. NewRule checks it once,
// when a configuration is compiled; the zero Rule builds Requests the guard
// refuses.
type Rule struct {
	req Request
}

// WindowsOf are the limiter's windows of a rule's limits.
func WindowsOf(limits []config.Limit) []Window {
	ws := make([]Window, len(limits))
	for i, l := range limits {
		ws[i] = Window{Requests: l.Requests, Period: l.Period.Duration, Burst: l.Burst, Calendar: l.Calendar}
		if l.Concurrent > 0 {
			ws[i] = ConcurrencyWindow(l.Concurrent)
		}
	}
	return ws
}

// NewRule checks the limiter's rule for cr, deciding with windows (cr's
// limits, a tier's or an override's, possibly scaled) for the buckets named
// by b (whose Tenant is ignored), and returns it. Leasing applies to the
// algorithms that lease exactly (TokenBucket, GCRA, FixedWindow).
// Configurations are checked with field paths by config.Parse; an error
// here is a bug in how the rule was compiled. NewRule keeps windows and cr:
// do not modify them.
func NewRule(b Bucket, cr *config.Rule, windows []Window, f FailurePolicy) (Rule, error) {
	req := Request{Bucket: b, Algorithm: cr.Algorithm, Windows: windows, Cost: cr.Cost, Failure: f,
		f: features{lease: cr.Leasing != config.LeasingOff, delay: cr.DelayMax(), ban: banOf(cr.Ban)}}
	req.f.calendar = hasCalendar(windows)
	if d := descriptorOf(req.Algorithm); d == nil || !d.leases || req.f.calendar || cr.ResponseCost != nil {
		// a lease or a cached refusal of a calendar window would have to
		// end at the window's end, which only the call knows, and a cost
		// settled after the answer goes to Redis (charge.go): those rules
		// decide every request in Redis
		req.f.lease = false
	}
	req.f.single = decidesAlone(&req)
	req.f.debts = cr.ResponseCost != nil && Charges(req.Algorithm)
	if req.Algorithm == Concurrency && req.f.delay > 0 {
		req.f.slotWait, req.f.slotQueue, req.f.delay = req.f.delay, int(cr.OnLimit.Delay.MaxQueued), 0
	}
	req.Bucket.Tenant = "-" // any tenant Rule.Request accepts; checked there
	if err := req.validate(); err != nil {
		return Rule{}, err
	}
	if err := validateDelay(req.Algorithm, req.f.delay); err != nil {
		return Rule{}, err
	}
	if req.f.ban != nil {
		if err := req.f.ban.validate(); err != nil {
			return Rule{}, err
		}
	}
	req.Bucket.Tenant = ""
	req.f.checked = true
	return Rule{req: req}, nil
}

// decidesAlone says req's decisions can run its algorithm's single-window
// script: one period window, no delay, no ban.
func decidesAlone(req *Request) bool {
	d := descriptorOf(req.Algorithm)
	return d != nil && d.single.sha != "" && len(req.Windows) == 1 && req.Windows[0].Calendar == nil && req.f.delay == 0 && req.f.ban == nil
}

// Windows are the rule's windows, shared by every Request it builds: do not
// modify them.
func (r Rule) Windows() []Window { return r.req.Windows }

// Request is the rule's Request for tenant. A Request with an empty tenant
// (HashTenant of an empty identity) is one the guard refuses.
func (r Rule) Request(tenant Tenant) Request {
	req := r.req
	req.Bucket.Tenant = tenant
	req.f.checked = req.f.checked && tenant != ""
	return req
}

// Decision is the outcome of a Request, described by its deciding window:
// the window that refused it (the one with the longest wait), or, when every
// window allowed it, the one with the fewest requests remaining.
type Decision struct {
	Allowed bool
	// Window is the index in Request.Windows of the deciding window.
	Window int
	// Limit is the deciding window's capacity (Requests; a token bucket's
	// Burst) and Period its Period, or for a calendar window the length of
	// its current window.
	Limit  int64
	Period time.Duration
	// Calendar is the deciding window's calendar; nil for a period.
	Calendar *config.Calendar
	// Remaining is how many cost units the deciding window still admits.
	Remaining int64
	// Debt is how far the deciding window is below empty, for a rule whose
	// answers report their cost (responseCost): what those answers
	// charged beyond the limit (charge.go), which the tenant waits out
	// before its next request fits. Zero otherwise.
	Debt int64
	// Reset is when the deciding window will be fully replenished.
	Reset time.Time
	// RetryAfter is how long to wait before the same request would be
	// admitted by every window; zero when allowed.
	RetryAfter time.Duration
	// Now is the clock the decision was made at: Redis' TIME, or the local
	// clock when Degraded.
	Now time.Time
	// Degraded is set when the policy's failure mode decided, not Redis.
	Degraded bool
	// Local is set when the guard decided without asking Redis: admitted
	// from a lease, or refused from the denial cache (lease.go).
	Local bool
	// CountedAt is when Redis counted what an admitted decision took, on
	// Redis' clock: Now for a Redis decision, the lease's grant for one
	// admitted from a lease. A refund gives it back to that time's fixed
	// window only.
	CountedAt time.Time
	// Delay is how long an admitted request must wait before it goes on:
	// its capacity was booked in Redis for then (a reservation, delay.go).
	// Zero when admitted now.
	Delay time.Duration
	// Ban is set when the tenant is banned under the rule (ban.go): the
	// decision refuses until Ban.Until.
	Ban BanState
}

// ErrInvalidRequest wraps every validation failure of a Request.
var ErrInvalidRequest = errors.New("invalid rate limit request")

// maxWindows bounds the windows of one rule; the API allows 8.
const maxWindows = 8

// validate reports why req cannot be decided. It runs once per rule, in
// NewRule, never per request.
func (req *Request) validate() error {
	if err := req.Bucket.validate(); err != nil {
		return err
	}
	return validateWindows(req.Algorithm, req.Windows, req.Cost)
}

// validateWindows reports why a rule of algorithm a with these windows and
// cost could never be decided.
func validateWindows(a Algorithm, windows []Window, cost int64) error {
	if descriptorOf(a) == nil {
		return fmt.Errorf("%w: unknown algorithm %q", ErrInvalidRequest, a)
	}
	if len(windows) == 0 || len(windows) > maxWindows {
		return fmt.Errorf("%w: a rule needs 1 to %d windows, got %d", ErrInvalidRequest, maxWindows, len(windows))
	}
	if cost < 1 {
		return fmt.Errorf("%w: cost must be at least 1, got %d", ErrInvalidRequest, cost)
	}
	for i, w := range windows {
		if w.Requests < 1 {
			return fmt.Errorf("%w: window %d: requests must be at least 1, got %d", ErrInvalidRequest, i, w.Requests)
		}
		if w.Calendar != nil {
			if a != FixedWindow || w.Period != 0 {
				return fmt.Errorf("%w: window %d: a calendar window is a FixedWindow's, without a period", ErrInvalidRequest, i)
			}
		} else if w.Period < time.Millisecond || w.Period%time.Millisecond != 0 {
			return fmt.Errorf("%w: window %d: period must be a whole number of milliseconds, at least 1ms, got %s", ErrInvalidRequest, i, w.Period)
		}
		if w.Burst < 0 {
			return fmt.Errorf("%w: window %d: burst must not be negative, got %d", ErrInvalidRequest, i, w.Burst)
		}
		if c := w.capacity(a); cost > c {
			return fmt.Errorf("%w: window %d: cost %d exceeds its capacity %d, so no request could ever pass", ErrInvalidRequest, i, cost, c)
		}
		for j := range i {
			if windows[j].windowID() == w.windowID() {
				return fmt.Errorf("%w: windows %d and %d share the period %s", ErrInvalidRequest, j, i, w.Period)
			}
		}
	}
	return nil
}
