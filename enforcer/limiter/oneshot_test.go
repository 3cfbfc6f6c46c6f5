package limiter

import (
	"context"
	"time"
)

// The enforcer decides every rule of a request at once (Guard.AllowAll);
// the tests often decide, and look up, one rule at a time.

// Allow is AllowAll for one request.
func (g *Guard) Allow(ctx context.Context, req Request) (Decision, error) {
	var buf [1]Outcome
	o := g.AllowAll(ctx, []Request{req}, buf[:0])[0]
	return o.Decision, o.Err
}

// Allow decides req against Redis alone; a Redis failure is returned as an
// error with a zero Decision.
func (r *Redis) Allow(ctx context.Context, req Request) (Decision, error) {
	if err := req.Validate(); err != nil {
		return Decision{}, err
	}
	return r.check(ctx, &req, req.Cost)
}

// Key is the Redis key of one window of b.
func (b Bucket) Key(a Algorithm, period time.Duration) string {
	return string(b.appendKey(nil, a, period))
}
