package limiter

import (
	"context"
	"fmt"
)

// Keys are the Redis keys of req's windows: one per window, in order,
// sl:{<namespace>/<policy>/<rule>/<tenant>}:<algorithm>:<period>. A ban's
// keys are apart (the ban's hash and its refusal log) and not listed.
func (req Request) Keys() []string {
	var stack [192]byte
	buf := req.Bucket.appendKeyPrefix(stack[:0], req.Algorithm)
	prefix := len(buf)
	keys := make([]string, 0, len(req.Windows))
	for _, w := range req.Windows {
		buf = appendPeriodLabel(buf[:prefix], w.Period)
		keys = append(keys, string(buf))
	}
	return keys
}

// ResetTenant deletes the state of req's bucket under req's windows in
// Redis, so that the tenant starts afresh under the rule, and forgets the
// refusal this guard cached for it. It returns how many keys existed. A
// ban is not lifted (LiftBan does that); other enforcers forget a cached
// refusal of the tenant when they next ask Redis.
func (g *Guard) ResetTenant(ctx context.Context, req Request) (int64, error) {
	if err := req.Bucket.validate(); err != nil {
		return 0, err
	}
	n, err := g.redis.client.Del(ctx, req.Keys()...).Result()
	if err != nil {
		return 0, fmt.Errorf("redis reset of %s: %w", req.Bucket, err)
	}
	if len(req.Windows) > 0 {
		g.cache.forget(windowsKey(&req))
	}
	return n, nil
}
