package limiter

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Leases and the denial cache let an enforcer decide a hot bucket's
// requests on its own, and stay exact.
//
// A lease is units that a Redis decision took beyond its own cost, in the
// same atomic script call (the algorithms with descriptor.leases). They
// are gone from Redis when leased, so every request admitted from a lease
// was paid for in Redis first: admissions across all enforcers never exceed
// what the limit hands out. A lease lasts leaseFor; what is left of it then
// goes back to Redis (and at a reload, a configuration change and
// shutdown). A FixedWindow lease also ends with its window, since its units
// only count there.
//
// The denial cache (the decision cache's entries under a bucket's windows,
// decision_cache.go) keeps a refusal until the Retry-After Redis gave: for
// these algorithms only time frees capacity, so Redis would refuse the
// same request until then. Two things free capacity sooner and are not
// seen by other replicas: a refund (another rule refused a request this one
// admitted) and a lease returned early. Both make the cache refuse a
// little longer than Redis would, never admit more.
//
// Lease sizes follow each bucket's traffic: a bucket seeing few requests
// asks Redis per request (a lease would only be returned); a busy one
// leases about leaseFor of its traffic, at most 1/leaseShare of what Redis
// last said it had left, so that one replica's lease never takes what a
// tenant's requests on another replica need. As the bucket empties, leases
// shrink to single requests.
const (
	// leaseFor is how long a lease lasts and how much traffic it covers.
	leaseFor = 100 * time.Millisecond
	// leaseShare: a lease takes at most 1/leaseShare of what is left.
	leaseShare = 4
	// leaseMaxUnits bounds one lease.
	leaseMaxUnits = 1 << 20
	// leaseMaxEntries bounds the buckets whose traffic is tracked; past it,
	// new buckets are decided by Redis per request, which is always exact.
	leaseMaxEntries = 50_000
	// leaseRenew: a lease in use this close to its end is renewed.
	leaseRenew = leaseFor / 4
	// leaseTick is how often ended leases are returned.
	leaseTick = leaseFor / 4
	// leaseIdle is how long a bucket without a lease, a cached refusal or a
	// request is remembered.
	leaseIdle = 10 * time.Second
	// returnTimeout bounds one batch of lease returns.
	returnTimeout = 500 * time.Millisecond
)

// leaseEntry is one bucket's lease and traffic, under a set of windows,
// guarded by its shard's lock.
type leaseEntry struct {
	key bucketKey

	// units are the lease's unused units, until expires (the Guard's
	// clock). end is a FixedWindow lease's window end (the Guard's clock, 0
	// for other algorithms): units never outlive it; window is that end on
	// Redis' clock (µs), which names the window.
	units, expires, end, window int64
	// grant is made at the bucket's first grant: most buckets never lease
	// (a tenant sending a request a second asks Redis per request), and an
	// entry without it is a third of the size.
	grant *leaseGrant
	// left is what the last decision that admitted said was left, once
	// known (a decision with a time).
	left  int64
	known bool

	// hits are requests since since; rate is requests per second.
	hits, since int64
	rate        float64
	// calling is set while a call for this bucket is in flight: requests
	// the entry cannot answer wait for it (up to their deadline) instead
	// of all asking Redis at once when a lease runs out or a refusal ends.
	// inflight, made by the first of them, is closed when the call ends.
	calling  bool
	inflight chan struct{}
	lastSeen int64
	// held is set while the entry is in its shard's held list.
	held bool
	// gone is set when the entry was dropped (Release): a grant arriving
	// for it goes straight back.
	gone bool
}

// leaseGrant is what a bucket that has leased keeps.
type leaseGrant struct {
	// req is the bucket's request, for returns and prefetches; set once.
	req Request
	// base is the last decision that admitted, from the first grant on:
	// what lease decisions report, with the lease's units added to
	// Remaining. Its CountedAt dates the units (the fixed window they
	// count in).
	base Decision
}

// leaseShard is what a shard of the lease table keeps besides its map.
type leaseShard struct {
	held []*leaseEntry // entries with units, checked every leaseTick
}

// leases is a Guard's leases and their counters. Its times (expiries,
// traffic) are on the Guard's clock. The bucket's cached refusal lives in
// the decision cache, refusals, which answers the requests a lease cannot.
type leases struct {
	clock    clock
	refusals *decisionCache
	m        shardedMap[bucketKey, *leaseEntry, leaseShard]
	stats    sync.Map // policy -> *LeaseCounts

	mu      sync.Mutex
	orphans []pendingReturn // units granted to dropped entries
}

// pendingReturn is units to give back to req's windows, counted at
// counted (µs, Redis' clock).
type pendingReturn struct {
	req     Request
	units   int64
	counted int64
}

func newLeases(c clock, refusals *decisionCache) *leases {
	t := &leases{clock: c, refusals: refusals}
	t.m.init(leaseMaxEntries)
	return t
}

// LeaseCounts are a policy's decisions made without Redis and what its
// leases took and gave back, as counted since the enforcer started.
type LeaseCounts struct {
	// LeaseAdmits are requests admitted from a lease; CachedRefusals are
	// requests refused by the denial cache.
	LeaseAdmits, CachedRefusals atomic.Int64
	// RedisCalls are script calls for decisions, leases, returns and refunds.
	RedisCalls atomic.Int64
	// Grants are leases granted; UnitsLeased the units they held beyond
	// their requests' cost; UnitsReturned the units given back to Redis;
	// UnitsExpired the units whose FixedWindow ended before they were
	// used (they counted in that window only).
	Grants, UnitsLeased, UnitsReturned, UnitsExpired atomic.Int64
	// ReturnFailures are returns Redis did not confirm, and UnitsLost their
	// units: they are not sent again, since the first may have arrived, so
	// a failure can only under-admit.
	ReturnFailures, UnitsLost atomic.Int64
	// LeaseFailures are calls asking for a lease that got no answer in
	// time: whatever Redis took for them is lost the same way.
	LeaseFailures atomic.Int64
}

func (t *leases) counts(policy string) *LeaseCounts {
	if c, ok := t.stats.Load(policy); ok {
		return c.(*LeaseCounts)
	}
	c, _ := t.stats.LoadOrStore(policy, new(LeaseCounts))
	return c.(*LeaseCounts)
}

// localAnswer is what the lease table says of one request.
type localAnswer struct {
	decision Decision
	// local is set when decision answers the request.
	local bool
	// want is what to ask Redis for otherwise: the request's cost, or more
	// for a lease. owner is set when this request's call is the bucket's
	// call in flight: settle or unfetch must follow.
	want  int64
	owner bool
	// wait, when not nil, is the bucket's call in flight: answer again
	// once it is closed.
	wait <-chan struct{}
	// prefetch is set when the request was admitted from a lease running
	// low: the caller asks Redis for the next lease of this size, then
	// settles it.
	prefetch int64
	// entry is the bucket's entry, nil when the table is full.
	entry *leaseEntry
}

// answer decides req from its lease or its cached refusal when it can, and
// otherwise says what to ask Redis for, or which call in flight to wait
// for when mayWait; first is set on a request's first answer, the one that
// counts it into the bucket's rate. The clock is read under the lock: a
// request that was descheduled on its way here must not spend a fixed
// window's lease after the window ended.
func (t *leases) answer(req *Request, first, mayWait bool) localAnswer {
	k := windowsKey(req)
	sh := t.m.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := t.clock.now()
	e := sh.m[k]
	if e == nil {
		if !t.m.reserve() {
			if d, ok := t.refused(req, k, now); ok {
				return localAnswer{decision: d, local: true}
			}
			return localAnswer{want: req.Cost}
		}
		e = &leaseEntry{key: k, since: now}
		sh.m[k] = e
	}
	e.lastSeen = now
	if first {
		e.observe(now) // once per request, however long it waits
	}
	// A lease first: its units were taken from Redis, so spending them is
	// exact even when a refusal arrived after them.
	if e.units >= req.Cost && now < e.expires {
		e.units -= req.Cost
		d := e.grant.base
		d.Remaining = min(d.Limit, d.Remaining+e.units)
		d.Now, d.Local = t.clock.wall(now), true
		t.counts(req.Bucket.Policy).LeaseAdmits.Add(1)
		a := localAnswer{decision: d, local: true}
		if want := e.want(req); !e.calling && want > req.Cost {
			switch {
			case e.units < want/2:
				// running low: the next lease
				e.calling = true
				a.prefetch, a.entry = want, e
			case e.expires-now < int64(leaseRenew) && (e.end == 0 || e.expires < e.end):
				// running out of time with units left: topped up to
				// want, which renews the whole lease, so that the
				// requests after its end do not wait for Redis. Not at
				// a fixed window's end: no lease outlives its window.
				e.calling = true
				a.prefetch, a.entry = max(want-e.units, req.Cost), e
			}
		}
		return a
	}
	if d, ok := t.refused(req, k, now); ok {
		return localAnswer{decision: d, local: true}
	}
	if e.calling && mayWait {
		if e.inflight == nil {
			e.inflight = make(chan struct{})
		}
		return localAnswer{wait: e.inflight}
	}
	a := localAnswer{want: req.Cost, entry: e}
	if !e.calling {
		e.calling = true
		a.want, a.owner = e.want(req), true
	}
	return a
}

// refused answers req from the cached refusal of its bucket k, if any. A
// rule with a ban caches none (settle): its bans are cached instead.
func (t *leases) refused(req *Request, k bucketKey, now int64) (Decision, bool) {
	if req.f.ban != nil {
		return Decision{}, false
	}
	d, a := t.refusals.lookup(k, now)
	if a == cacheMiss {
		return Decision{}, false
	}
	t.counts(req.Bucket.Policy).CachedRefusals.Add(1)
	return d, true
}

// unfetch ends the call in flight of e, which got no answer; asked says
// it reached Redis asking for a lease.
func (t *leases) unfetch(e *leaseEntry, asked bool) {
	if asked {
		t.counts(e.key.bucket.Policy).LeaseFailures.Add(1)
	}
	sh := t.m.shardOf(e.key)
	sh.mu.Lock()
	e.done()
	sh.mu.Unlock()
}

// done ends the call in flight and wakes its waiters; the entry's lock is
// held.
func (e *leaseEntry) done() {
	e.calling = false
	if e.inflight != nil {
		close(e.inflight)
		e.inflight = nil
	}
}

// observe counts a request into the bucket's rate.
func (e *leaseEntry) observe(now int64) {
	e.hits++
	elapsed := now - e.since
	if elapsed < int64(leaseFor) {
		return
	}
	inst := float64(e.hits) / (float64(elapsed) / float64(time.Second))
	if elapsed > 2*int64(leaseFor) || e.rate == 0 {
		e.rate = inst // a gap: the old rate says nothing of now
	} else {
		e.rate = (e.rate + inst) / 2
	}
	e.hits, e.since = 0, now
}

// want is the lease to ask for, for req of e's bucket: leaseFor of the
// bucket's traffic, at most a share of what Redis last said was left (of
// the capacity before any grant), or just req's cost when that is not
// worth a lease.
func (e *leaseEntry) want(req *Request) int64 {
	cost := req.Cost
	n := int64(e.rate*leaseFor.Seconds()) * cost
	left := e.left
	if !e.known {
		left = math.MaxInt64
		for _, w := range req.Windows {
			left = min(left, w.capacity(req.Algorithm))
		}
	}
	n = min(n, left/leaseShare, leaseMaxUnits)
	if n < 2*cost {
		return cost
	}
	return n
}
