package limiter

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Guard's side of bans: it refuses a tenant Redis said is banned from
// its decision cache until the ban ends (re-checked every BanRecheck),
// records bans in their rule's index, and reads, lists and lifts them.

const (
	// banIndexTimeout bounds the call recording a new ban in its rule's
	// index.
	banIndexTimeout = time.Second
	// banListMax bounds one listing of a rule's bans.
	banListMax = 1000
)

// BanStartKey names a counter of bans started: by policy, rule and level.
type BanStartKey struct {
	Policy, Rule string
	Level        int64
}

// banCounts are a Guard's counters of bans.
type banCounts struct {
	// started counts bans started, by BanStartKey.
	started sync.Map
	// refused counts requests refused from cached bans, by policy.
	refused sync.Map
}

func (c *banCounts) refusedCounter(policy string) *atomic.Int64 {
	v, ok := c.refused.Load(policy)
	if !ok {
		v, _ = c.refused.LoadOrStore(policy, new(atomic.Int64))
	}
	return v.(*atomic.Int64)
}

// BansStarted calls f with every counter of bans this guard started.
func (g *Guard) BansStarted(f func(k BanStartKey, n int64)) {
	g.bans.started.Range(func(k, v any) bool {
		f(k.(BanStartKey), v.(*atomic.Int64).Load())
		return true
	})
}

// BanCachedRefusals calls f with the requests of each policy refused from
// cached bans, without a Redis call.
func (g *Guard) BanCachedRefusals(f func(policy string, n int64)) {
	g.bans.refused.Range(func(k, v any) bool {
		f(k.(string), v.(*atomic.Int64).Load())
		return true
	})
}

// banStarted counts a ban a decision of req started and records it in its
// rule's index, in the background: a ban's start is rare, and the index
// has a hash tag of its own, so it cannot join the decision's call.
func (g *Guard) banStarted(req *Request, d Decision) {
	k := BanStartKey{Policy: req.Bucket.Policy, Rule: req.Bucket.Rule, Level: d.Ban.Level}
	v, ok := g.bans.started.Load(k)
	if !ok {
		v, _ = g.bans.started.LoadOrStore(k, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
	g.leases.counts(req.Bucket.Policy).RedisCalls.Add(1)
	key, tenant, until, ttl := req.Bucket.banIndexKey(), string(req.Bucket.Tenant), d.Ban.Until, req.f.ban.Longest()
	g.prefetchMu.Lock()
	defer g.prefetchMu.Unlock()
	if g.closing {
		return
	}
	g.prefetches.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), banIndexTimeout)
		defer cancel()
		_, _ = g.redis.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.ZAdd(ctx, key, redis.Z{Score: float64(until.UnixMilli()), Member: tenant})
			p.ZRemRangeByScore(ctx, key, "-inf", "("+strconv.FormatInt(time.Now().UnixMilli(), 10))
			// every ban in the index ends within the longest duration
			p.PExpire(ctx, key, ttl+time.Minute)
			return nil
		})
	})
}

// BanEntry is one banned tenant of a rule, as the rule's index lists it.
type BanEntry struct {
	Tenant Tenant
	Until  time.Time
	// Level is the ban's level; 0 when the ban ended while listing.
	Level int64
}

// ActiveBans counts the tenants banned under the rule of b (whose Tenant
// is ignored) now, from the rule's index in Redis.
func (g *Guard) ActiveBans(ctx context.Context, b Bucket) (int64, error) {
	n, err := g.redis.client.ZCount(ctx, b.banIndexKey(), "("+strconv.FormatInt(time.Now().UnixMilli(), 10), "+inf").Result()
	if err != nil {
		return 0, fmt.Errorf("redis count bans of %s/%s: %w", b.Policy, b.Rule, err)
	}
	return n, nil
}

// ListBans lists up to 1000 tenants banned under the rule of b (whose
// Tenant is ignored) now, the soonest to end first.
func (g *Guard) ListBans(ctx context.Context, b Bucket) ([]BanEntry, error) {
	zs, err := g.redis.client.ZRangeByScoreWithScores(ctx, b.banIndexKey(), &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(time.Now().UnixMilli(), 10), Max: "+inf", Count: banListMax,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("redis list bans of %s/%s: %w", b.Policy, b.Rule, err)
	}
	out := make([]BanEntry, 0, len(zs))
	for _, z := range zs {
		tb := b
		tb.Tenant = Tenant(fmt.Sprint(z.Member))
		st, err := g.BanOf(ctx, tb)
		if err != nil {
			return nil, err
		}
		if !st.Active() {
			continue // lifted or ended since
		}
		out = append(out, BanEntry{Tenant: tb.Tenant, Until: st.Until, Level: st.Level})
	}
	return out, nil
}

// TenantBan is a tenant's ban state under a rule, as /debug/tenant shows it.
type TenantBan struct {
	BanState
	// RecentDenials are the refusals logged toward the next ban.
	RecentDenials int64
}

// BanOf reads the ban of b's tenant from Redis, without changing it: its
// level is kept after the ban ends, until forgetAfter.
func (g *Guard) BanOf(ctx context.Context, b Bucket) (TenantBan, error) {
	var stack [192]byte
	banKey, logKey := string(b.appendBanKey(stack[:0], "ban")), string(b.appendBanKey(stack[:0], "bandenials"))
	var vals *redis.SliceCmd
	var n *redis.IntCmd
	var now *redis.TimeCmd
	_, err := g.redis.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		vals = p.HMGet(ctx, banKey, "u", "l", "d")
		n = p.LLen(ctx, logKey)
		now = p.Time(ctx)
		return nil
	})
	if err != nil {
		return TenantBan{}, fmt.Errorf("redis read ban of %s: %w", b, err)
	}
	out := TenantBan{RecentDenials: n.Val()}
	field := func(i int) int64 {
		s, _ := vals.Val()[i].(string)
		v, _ := strconv.ParseInt(s, 10, 64)
		return v
	}
	out.Level, out.Denials = field(1), field(2)
	if u := time.UnixMicro(field(0)); field(0) != 0 && u.After(now.Val()) {
		out.Until = u
	}
	return out, nil
}

// LiftBan ends the ban of req's tenant under req's rule at once, on every
// replica within BanRecheck (at once on this one), and forgets its level.
// It reports whether a ban was in force.
func (g *Guard) LiftBan(ctx context.Context, req Request) (bool, error) {
	var stack [192]byte
	keys := []string{string(req.Bucket.appendBanKey(stack[:0], "ban")), string(req.Bucket.appendBanKey(stack[:0], "bandenials"))}
	ends, err := g.redis.client.EvalSha(ctx, banLiftScript.sha, keys).Int64()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		ends, err = g.redis.client.Eval(ctx, banLiftScript.src, keys).Int64()
	}
	if err != nil {
		return false, fmt.Errorf("redis lift ban of %s: %w", req.Bucket, err)
	}
	g.cache.forget(banKey(req.Bucket))
	if err := g.redis.client.ZRem(ctx, req.Bucket.banIndexKey(), string(req.Bucket.Tenant)).Err(); err != nil {
		return ends != 0, fmt.Errorf("redis lift ban of %s: remove from index: %w", req.Bucket, err)
	}
	return ends != 0, nil
}

var banLiftScript = newScript("ban_lift.lua")

// observeBan records what a Redis decision of a rule with a ban, sent at
// sent (the Guard's clock), says of the tenant's ban: a ban is cached
// until it ends, anything else forgets the tenant's cached ban.
func (g *Guard) observeBan(req *Request, d Decision, sent int64) {
	k := banKey(req.Bucket)
	if !d.Ban.Active() {
		g.cache.forget(k)
		return
	}
	// Redis read its clock after sent: ending at sent plus the wait it
	// gave ends no later than the ban does.
	g.cache.store(k, d, sent+int64(d.Ban.Until.Sub(d.Now)), sent+int64(BanRecheck))
	if d.Ban.Started {
		g.banStarted(req, d)
	}
}
