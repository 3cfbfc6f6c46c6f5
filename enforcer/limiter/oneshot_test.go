package limiter

import (
	"context"
	"testing"
	"time"
)

// The enforcer decides every rule of a request at once (Guard.AllowAll);
// the tests often decide, and look up, one rule at a time.

// Allow is AllowAll for one request, built the way a route table builds
// it: req's rule checked by NewRule, so an invalid one is refused there.
func (g *Guard) Allow(ctx context.Context, req Request) (Decision, error) {
	req, err := checked(req)
	if err != nil {
		return Decision{}, err
	}
	var buf [1]Outcome
	o := g.AllowAll(ctx, []Request{req}, buf[:0])[0]
	return o.Decision, o.Err
}

// Allow decides req against Redis alone; a Redis failure is returned as an
// error with a zero Decision.
func (r *Redis) Allow(ctx context.Context, req Request) (Decision, error) {
	if err := req.validate(); err != nil {
		return Decision{}, err
	}
	return r.check(ctx, &req, req.Cost)
}

// Key is the Redis key of one window of b.
func (b Bucket) Key(a Algorithm, period time.Duration) string {
	return string(b.appendKey(nil, a, period))
}

// checked rebuilds req through NewRule and Rule.Request.
func checked(req Request) (Request, error) {
	rule, err := NewRule(req.Bucket, req.Algorithm, req.Windows, req.Cost, req.Failure)
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
