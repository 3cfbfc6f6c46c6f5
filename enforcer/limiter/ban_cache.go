package limiter

import (
	"context"
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// BanRecheck is how long a guard refuses a banned tenant from its
	// cache before asking Redis again: the bound on how long a ban lifted
	// on another replica (or by an operator in Redis) is still enforced
	// here. Between checks a banned tenant costs no Redis call.
	BanRecheck = 5 * time.Second
	// banMaxEntries bounds the cached bans; past it, banned tenants are
	// answered by Redis per request, which is exact too.
	banMaxEntries = 100_000
	banShards     = 16
	// banIndexTimeout bounds the call recording a new ban in its rule's
	// index.
	banIndexTimeout = time.Second
	// banListMax bounds one listing of a rule's bans.
	banListMax = 1000
)

// banCache is a Guard's bans: a tenant Redis said is banned until T is
// refused locally until T, re-checked every BanRecheck. Its times are
// nanoseconds of a monotonic clock since base.
type banCache struct {
	base    time.Time
	seed    maphash.Seed
	entries atomic.Int64
	shards  [banShards]banShard
	// started counts bans started, by banStartKey.
	started sync.Map
	// refused counts requests refused from the cache, by policy.
	refused sync.Map
}

type banShard struct {
	mu sync.Mutex
	m  map[Bucket]*banEntry
	_  [48]byte
}

// banEntry is one cached ban: until and checked (when Redis last said so)
// on the cache's clock, and the decision Redis gave.
type banEntry struct {
	until, checked int64
	decision       Decision
}

func newBanCache() *banCache {
	c := &banCache{base: time.Now(), seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = map[Bucket]*banEntry{}
	}
	return c
}

func (c *banCache) clock() int64 { return int64(time.Since(c.base)) }

func (c *banCache) shard(b Bucket) *banShard {
	return &c.shards[maphash.Comparable(c.seed, b)%banShards]
}

// banLookup is what the cache knows of a request's tenant.
type banLookup uint8

const (
	banUnknown banLookup = iota
	// banCached: refuse with the cached decision, no Redis call.
	banCached
	// banRecheck: the cached ban is due for a check; the request asks
	// Redis, and is refused with the cached decision if Redis cannot answer.
	banRecheck
)

// lookup answers req from its tenant's cached ban. One request per
// BanRecheck is sent on to Redis to check that the ban still holds.
func (c *banCache) lookup(req *Request) (Decision, banLookup) {
	sh := c.shard(req.Bucket)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[req.Bucket]
	if e == nil {
		return Decision{}, banUnknown
	}
	now := c.clock()
	if now >= e.until {
		delete(sh.m, req.Bucket)
		c.entries.Add(-1)
		return Decision{}, banUnknown
	}
	d := e.decision
	d.RetryAfter = time.Duration(e.until - now)
	d.Now, d.Local = c.base.Add(time.Duration(now)), true
	d.Ban.Started = false
	if now-e.checked >= int64(BanRecheck) {
		e.checked = now // this request checks; the others keep refusing
		return d, banRecheck
	}
	c.refusedCounter(req.Bucket.Policy).Add(1)
	return d, banCached
}

// observe records a Redis decision of req sent at sent (the cache's
// clock): a ban is cached until it ends, anything else forgets the
// tenant's cached ban.
func (c *banCache) observe(req *Request, d Decision, sent int64) {
	sh := c.shard(req.Bucket)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[req.Bucket]
	if !d.Ban.Active() {
		if e != nil {
			delete(sh.m, req.Bucket)
			c.entries.Add(-1)
		}
		return
	}
	if e == nil {
		if c.entries.Add(1) > banMaxEntries {
			c.entries.Add(-1)
			return
		}
		e = &banEntry{}
		sh.m[req.Bucket] = e
	}
	// Redis read its clock after sent: ending at sent plus the wait it
	// gave ends no later than the ban does.
	e.until, e.checked, e.decision = sent+int64(d.Ban.Until.Sub(d.Now)), sent, d
}

// forget drops the cached ban of b.
func (c *banCache) forget(b Bucket) {
	sh := c.shard(b)
	sh.mu.Lock()
	if _, ok := sh.m[b]; ok {
		delete(sh.m, b)
		c.entries.Add(-1)
	}
	sh.mu.Unlock()
}

// sweep drops the bans that have ended; all, when all is set.
func (c *banCache) sweep(all bool) {
	now := c.clock()
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for b, e := range sh.m {
			if all || now >= e.until {
				delete(sh.m, b)
				c.entries.Add(-1)
			}
		}
		sh.mu.Unlock()
	}
}

// BanStartKey names a counter of bans started: by policy, rule and level.
type BanStartKey struct {
	Policy, Rule string
	Level        int64
}

func (c *banCache) refusedCounter(policy string) *atomic.Int64 {
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
	key, tenant, until, ttl := req.Bucket.banIndexKey(), string(req.Bucket.Tenant), d.Ban.Until, req.Ban.Longest()
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
	g.bans.forget(req.Bucket)
	if err := g.redis.client.ZRem(ctx, req.Bucket.banIndexKey(), string(req.Bucket.Tenant)).Err(); err != nil {
		return ends != 0, fmt.Errorf("redis lift ban of %s: remove from index: %w", req.Bucket, err)
	}
	return ends != 0, nil
}

var banLiftScript = newScript("ban_lift.lua")

// observeBan records what a Redis decision of a rule with a ban says of
// the tenant's ban.
func (g *Guard) observeBan(req *Request, d Decision, sent int64) {
	g.bans.observe(req, d, sent)
	if d.Ban.Started {
		g.banStarted(req, d)
	}
}
