package limiter

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// Helpers of the package's tests. The enforcer decides every rule of a
// request at once (Guard.Decide); the tests often decide, and look up,
// one rule at a time, and move a guard's clock by hand.

// Allow is Decide for one request, built the way a route table builds
// it: req's rule checked by NewRule, so an invalid one is refused there.
func (g *Guard) Allow(ctx context.Context, req Request) (Decision, error) {
	req, err := checked(req)
	if err != nil {
		return Decision{}, err
	}
	var buf [1]Admission
	o := g.Decide(ctx, []Request{req}, buf[:0])[0]
	return o.Decision, o.Err
}

// Allow decides req against Redis alone, by the script NewRule would
// choose for its rule; a Redis failure is returned as an
// error with a zero Decision.
func (r *Redis) Allow(ctx context.Context, req Request) (Decision, error) {
	if err := req.validate(); err != nil {
		return Decision{}, err
	}
	req.f.single = decidesAlone(&req) // as NewRule would choose
	return r.check(ctx, &req, req.Cost)
}

// Key is the Redis key of one window of b.
func (b Bucket) Key(a Algorithm, period time.Duration) string {
	return string(b.appendKey(nil, a, period))
}

// checked rebuilds req through NewRule and Rule.Request.
func checked(req Request) (Request, error) {
	rule, err := newRule(req.Bucket, req.Algorithm, req.Windows, req.Cost, req.Failure)
	if err != nil {
		return Request{}, err
	}
	return rule.Request(req.Bucket.Tenant), nil
}

// mustCheck is checked for requests a test knows are valid.
func mustCheck(t testing.TB, req Request) Request {
	t.Helper()
	req, err := checked(req)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// fakeClock is a Guard's clock that stands still until the test moves it,
// so that a test of leases and cached decisions waits for no timer. Redis
// keeps its own time: what the scripts decide still follows the wall clock.
type fakeClock struct {
	base time.Time
	at   atomic.Int64
}

func (c *fakeClock) now() int64 { return c.at.Load() }

func (c *fakeClock) wall(at int64) time.Time { return c.base.Add(time.Duration(at)) }

// advance moves the clock d forward.
func (c *fakeClock) advance(d time.Duration) { c.at.Add(int64(d)) }

// newGuardOnFakeClock is a guard on url whose clock the test moves, closed
// when t ends.
func newGuardOnFakeClock(t *testing.T, url string) (*Guard, *fakeClock) {
	t.Helper()
	c := &fakeClock{base: time.Now()}
	g := newGuardWith(newRedis(t, url), c)
	t.Cleanup(g.Close)
	return g, c
}

// ruleOption sets a property of the config.Rule a test's rule is built from.
type ruleOption func(*config.Rule)

// newRule is NewRule for the rule named by b of algorithm a, costing cost,
// as config.Parse would pass it.
func newRule(b Bucket, a Algorithm, windows []Window, cost int64, f FailurePolicy, opts ...ruleOption) (Rule, error) {
	cr := &config.Rule{Name: b.Rule, Algorithm: a, Cost: cost}
	for _, o := range opts {
		o(cr)
	}
	return NewRule(b, cr, windows, f)
}

// withLeasing is the rule's leasing.
func withLeasing(l config.Leasing) ruleOption {
	return func(cr *config.Rule) { cr.Leasing = l }
}

// withDelay lets the rule's requests over the limit wait up to longest.
func withDelay(longest time.Duration) ruleOption {
	return func(cr *config.Rule) {
		cr.OnLimit = &config.OnLimit{Delay: &config.Delay{Max: config.Duration{Duration: longest}, MaxQueued: config.DefaultDelayMaxQueued}}
	}
}

// banSpec is a config.Ban written with time.Durations.
type banSpec struct {
	Denials     int64
	Within      time.Duration
	Durations   []time.Duration
	ForgetAfter time.Duration
}

// withBan gives the rule the ban b.
func withBan(b *banSpec) ruleOption {
	return func(cr *config.Rule) {
		cr.Ban = &config.Ban{Denials: b.Denials, Within: config.Duration{Duration: b.Within}, ForgetAfter: config.Duration{Duration: b.ForgetAfter}}
		for _, d := range b.Durations {
			cr.Ban.Durations = append(cr.Ban.Durations, config.Duration{Duration: d})
		}
	}
}

// refund gives back, through admissions, what decisions of reqs counted at
// counted took, as a refused request's other checks do.
func (g *Guard) refund(ctx context.Context, reqs []Request, counted []time.Time) error {
	adms := make([]Admission, len(reqs))
	for i := range reqs {
		adms[i] = Admission{Decision: Decision{Allowed: true, CountedAt: counted[i]}, g: g, req: reqs[i]}
		adms[i].GiveBack()
	}
	return Settle(ctx, adms)
}

// giveBack gives back units[i] of reqs[i] on the caller's word (Claim).
func (g *Guard) giveBack(ctx context.Context, reqs []Request, units []int64) error {
	adms := make([]Admission, len(reqs))
	for i := range reqs {
		adms[i] = g.Claim(reqs[i].WithCost(units[i]))
		adms[i].GiveBack()
	}
	return Settle(ctx, adms)
}

// charge settles units[i] more (fewer when negative) of the decisions of
// reqs counted at counted, and reports each one's debt.
func (g *Guard) charge(ctx context.Context, reqs []Request, units []int64, counted []time.Time) ([]int64, error) {
	adms := make([]Admission, len(reqs))
	for i := range reqs {
		adms[i] = Admission{Decision: Decision{Allowed: true, CountedAt: counted[i]}, g: g, req: reqs[i]}
		adms[i].Charge(reqs[i].Cost + units[i])
	}
	err := Settle(ctx, adms)
	debt := make([]int64, len(reqs))
	for i := range adms {
		debt[i] = adms[i].Debt()
	}
	return debt, err
}

// hold is the admission of d for req, holding its slots.
func (g *Guard) hold(req Request, d Decision) Admission {
	a := Admission{Decision: d, g: g, req: req}
	a.Hold()
	return a
}

// awaitSlot waits for a slot for req as a refused admission does.
func (g *Guard) awaitSlot(ctx context.Context, req Request) (Admission, bool, error) {
	a := Admission{g: g, req: req}
	ok, err := a.AwaitSlot(ctx)
	return a, ok, err
}

// holds says whether a holds slots.
func (a *Admission) holds() bool { return a.slot.held }
