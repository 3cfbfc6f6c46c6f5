package limiter

import (
	"context"
	"errors"
)

// GiveBack gives units[i] back to the bucket of reqs[i] on a caller's word,
// not for a decision it admitted (Envoy's is_negative_hits), into the
// window in progress. It is a refund, with a refund's caps: no window is
// given more than it counts (never below empty, never above full), so a
// bucket never admits more than its limit after it. Before, this guard's
// lease of each bucket is returned, so that units it leased are not taken
// for units used; and its cached refusal of the bucket is forgotten, so
// the room given back is seen. Units the leases of other guards hold count
// as used until they return them (within leaseFor).
func (g *Guard) GiveBack(ctx context.Context, reqs []Request, units []int64) error {
	if len(reqs) == 0 || g.skipping() {
		return nil
	}
	now := g.clock.now()
	var returns []pendingReturn
	for i := range reqs {
		k := windowsKey(&reqs[i])
		g.cache.forget(k)
		returns = g.leases.end(k, now, returns)
	}
	timeout := reqs[0].Failure.timeout()
	for i := range reqs {
		timeout = max(timeout, reqs[i].Failure.timeout())
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	g.leases.giveBack(ctx, g.redis, returns)
	counted := make([]int64, len(reqs))
	at := g.now().UnixMicro()
	for i := range counted {
		counted[i] = at
	}
	return errors.Join(g.redis.giveBack(ctx, reqs, units, counted)...)
}

// end empties the lease of bucket k at now into dst.
func (t *leases) end(k bucketKey, now int64, dst []pendingReturn) []pendingReturn {
	sh := t.m.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[k]; e != nil && e.held {
		dst = t.take(e, now, dst)
	}
	return dst
}
