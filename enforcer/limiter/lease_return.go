package limiter

import (
	"context"
	"time"
)

// refund puts back cost, counted at counted (Redis' clock), into req's
// live lease and forgets its cached refusal, reporting whether a lease took
// it (otherwise Redis must). A fixed window's lease takes back only units
// of its own window.
func (t *leases) refund(req *Request, counted time.Time) bool {
	k := windowsKey(req)
	t.refusals.forget(k)
	sh := t.m.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[k]
	if e == nil || !e.held || t.clock.now() >= e.expires {
		return false
	}
	if e.end != 0 && windowEnd(req.Windows, counted).UnixMicro() != e.window {
		return false
	}
	e.units += req.Cost
	return true
}

// ended takes the units of leases that have ended by now, to give back,
// dropping those whose FixedWindow is over, and, when idle, forgets buckets
// not seen for leaseIdle.
func (t *leases) ended(now int64, idle bool, dst []pendingReturn) []pendingReturn {
	idleBefore := now - int64(leaseIdle)
	for i := range t.m.shards {
		sh := &t.m.shards[i]
		sh.mu.Lock()
		kept := sh.x.held[:0]
		for _, e := range sh.x.held {
			if now < e.expires {
				kept = append(kept, e)
				continue
			}
			e.held = false
			dst = t.take(e, now, dst)
		}
		clear(sh.x.held[len(kept):])
		sh.x.held = kept
		if idle {
			t.m.removeIf(sh, func(_ bucketKey, e *leaseEntry) bool {
				return !e.held && !e.calling && e.lastSeen < idleBefore
			})
		}
		sh.mu.Unlock()
	}
	return t.takeOrphans(dst)
}

// take empties e's lease at now into dst, unless its window has ended.
func (t *leases) take(e *leaseEntry, now int64, dst []pendingReturn) []pendingReturn {
	if e.units == 0 {
		return dst
	}
	if e.end != 0 && now >= e.end {
		t.counts(e.key.bucket.Policy).UnitsExpired.Add(e.units)
	} else {
		dst = append(dst, pendingReturn{req: e.grant.req, units: e.units, counted: e.grant.base.CountedAt.UnixMicro()})
	}
	e.units = 0
	return dst
}

// release empties every lease and forgets every bucket, for a new
// configuration or shutdown; it returns what is to be given back.
func (t *leases) release(now int64) []pendingReturn {
	var dst []pendingReturn
	for i := range t.m.shards {
		sh := &t.m.shards[i]
		sh.mu.Lock()
		t.m.removeIf(sh, func(_ bucketKey, e *leaseEntry) bool {
			dst = t.take(e, now, dst)
			e.held, e.gone = false, true
			return true
		})
		clear(sh.x.held)
		sh.x.held = sh.x.held[:0]
		sh.mu.Unlock()
	}
	return t.takeOrphans(dst)
}

// takeOrphans moves the units granted to dropped entries into dst.
func (t *leases) takeOrphans(dst []pendingReturn) []pendingReturn {
	t.mu.Lock()
	defer t.mu.Unlock()
	dst = append(dst, t.orphans...)
	t.orphans = t.orphans[:0]
	return dst
}

func (t *leases) orphan(r pendingReturn) {
	t.mu.Lock()
	t.orphans = append(t.orphans, r)
	t.mu.Unlock()
}

// giveBack returns the units of rs to Redis in one round trip, once each,
// and counts the outcome.
func (t *leases) giveBack(ctx context.Context, r *Redis, rs []pendingReturn) {
	if len(rs) == 0 {
		return
	}
	reqs := make([]Request, len(rs))
	units := make([]int64, len(rs))
	counted := make([]int64, len(rs))
	for i := range rs {
		reqs[i], units[i], counted[i] = rs[i].req, rs[i].units, rs[i].counted
	}
	ctx, cancel := context.WithTimeout(ctx, returnTimeout)
	defer cancel()
	for i, err := range r.giveBack(ctx, reqs, units, counted) {
		c := t.counts(reqs[i].Bucket.Policy)
		c.RedisCalls.Add(1)
		if err != nil {
			c.ReturnFailures.Add(1)
			c.UnitsLost.Add(units[i])
			continue
		}
		c.UnitsReturned.Add(units[i])
	}
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
