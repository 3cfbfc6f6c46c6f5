package limiter

import "time"

// The decision cache is a Guard's refusals that Redis would repeat: a
// cached refusal (the denial cache, lease.go) and a ban (ban.go) are the
// same thing, a decision to give again without Redis until it ends.
//
// A refusal is cached until the Retry-After Redis gave: for the algorithms
// that lease only time frees capacity, so Redis would refuse the same
// request until then. A ban is cached until it ends, and re-checked every
// BanRecheck, since a ban can be lifted on another replica. Times are on
// the Guard's clock, from when the call that learned them was sent: Redis
// read its clock after that, so an entry never outlives what Redis said.
const (
	// BanRecheck is how long a guard refuses a banned tenant from its
	// cache before asking Redis again: the bound on how long a ban lifted
	// on another replica (or by an operator in Redis) is still enforced
	// here. Between checks a banned tenant costs no Redis call.
	BanRecheck = 5 * time.Second
	// cacheMaxEntries bounds the cached decisions; past it, refused and
	// banned tenants are answered by Redis per request, which is exact too.
	cacheMaxEntries = 100_000
)

// bucketKey names what a Guard keeps locally of a bucket under one set of
// windows: its lease (lease.go) and its cached refusal. A tier, an
// override and a new configuration each have windows of their own (Rule
// keeps them), so nothing kept under some limits answers under others. A
// ban holds whatever the windows: its key has none (banKey).
type bucketKey struct {
	bucket  Bucket
	windows *Window
}

// windowsKey is the key of req's bucket under req's windows.
func windowsKey(req *Request) bucketKey {
	return bucketKey{bucket: req.Bucket, windows: &req.Windows[0]}
}

// banKey is the key of b's ban.
func banKey(b Bucket) bucketKey { return bucketKey{bucket: b} }

// cachedDecision is one entry of the decision cache: decision answers the
// bucket's requests until until; from recheckAt on, one request in
// BanRecheck asks Redis whether it still holds (recheckAt is until for an
// entry that needs no check).
type cachedDecision struct {
	until, recheckAt int64
	decision         Decision
}

// cacheAnswer is what the decision cache says of a request.
type cacheAnswer uint8

const (
	cacheMiss cacheAnswer = iota
	// cacheHit: refuse with the cached decision, no Redis call.
	cacheHit
	// cacheRecheck: the entry is due for a check; the request asks Redis,
	// and is answered with the cached decision if Redis cannot answer.
	cacheRecheck
)

// decisionCache is a Guard's cached decisions.
type decisionCache struct {
	clock clock
	m     shardedMap[bucketKey, *cachedDecision, struct{}]
}

func newDecisionCache(c clock) *decisionCache {
	dc := &decisionCache{clock: c}
	dc.m.init(cacheMaxEntries)
	return dc
}

// lookup answers a request of k at now from its cached decision, dated
// now, with the wait left until the entry ends.
func (c *decisionCache) lookup(k bucketKey, now int64) (Decision, cacheAnswer) {
	sh := c.m.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[k]
	if e == nil {
		return Decision{}, cacheMiss
	}
	if now >= e.until {
		c.m.remove(sh, k)
		return Decision{}, cacheMiss
	}
	d := e.decision
	d.RetryAfter = time.Duration(e.until - now)
	d.Now, d.Local = c.clock.wall(now), true
	d.Ban.Started = false
	if now >= e.recheckAt {
		e.recheckAt = now + int64(BanRecheck) // this request checks; the others keep refusing
		return d, cacheRecheck
	}
	return d, cacheHit
}

// store caches d for k until until, checked again from recheckAt; when the
// cache is full it keeps nothing.
func (c *decisionCache) store(k bucketKey, d Decision, until, recheckAt int64) {
	sh := c.m.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[k]
	if e == nil {
		if !c.m.reserve() {
			return
		}
		e = &cachedDecision{}
		sh.m[k] = e
	}
	e.until, e.recheckAt, e.decision = until, recheckAt, d
}

// forget drops the cached decision of k.
func (c *decisionCache) forget(k bucketKey) {
	sh := c.m.shardOf(k)
	sh.mu.Lock()
	c.m.remove(sh, k)
	sh.mu.Unlock()
}

// sweep drops the entries that have ended by now.
func (c *decisionCache) sweep(now int64) {
	c.m.sweep(func(_ bucketKey, e *cachedDecision) bool { return now >= e.until })
}

// clear drops every entry, for a new configuration.
func (c *decisionCache) clear() {
	c.m.sweep(func(bucketKey, *cachedDecision) bool { return true })
}
