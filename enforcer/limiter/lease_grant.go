package limiter

import (
	"math"
	"time"
)

// settle records a Redis decision for req, of e's bucket, sent at sent (the
// Guard's clock) that took taken units at cost: a lease for what it took
// beyond cost, a cached refusal when it refused. owner ends the call in
// flight.
func (t *leases) settle(e *leaseEntry, req *Request, d Decision, taken, cost, sent int64, owner bool) {
	sh := t.m.shardOf(e.key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if owner {
		e.done()
	}
	c := t.counts(e.key.bucket.Policy)
	if !d.Allowed {
		// A rule with a ban counts every refusal in Redis: its refusals
		// are not cached, its bans are (ban.go).
		if d.RetryAfter > 0 && req.f.ban == nil {
			// Redis' clock read the state at some point after sent: ending
			// the refusal at sent + RetryAfter ends it no later than Redis would.
			until := sent + int64(d.RetryAfter)
			t.refusals.store(e.key, d, until, until)
		}
		return
	}
	if d.Delay > 0 {
		return // a reservation: nothing to lease, and base describes admissions now
	}
	e.left, e.known = d.Remaining, !d.Now.IsZero()
	extra := taken - cost
	if e.grant == nil && extra > 0 {
		e.grant = &leaseGrant{req: *req}
	}
	if e.grant != nil {
		e.grant.base = d
	}
	if extra <= 0 {
		return
	}
	c.Grants.Add(1)
	c.UnitsLeased.Add(extra)
	if e.gone {
		t.orphan(pendingReturn{req: e.grant.req, units: extra, counted: d.Now.UnixMicro()})
		return
	}
	expires := sent + int64(leaseFor)
	var end, window int64
	if req.Algorithm == FixedWindow {
		we := windowEnd(req.Windows, d.Now)
		end, window = sent+we.Sub(d.Now).Nanoseconds(), we.UnixMicro()
		expires = min(expires, end)
		if e.units > 0 && e.window != window {
			// the old units counted in a window that has ended in Redis
			c.UnitsExpired.Add(e.units)
			e.units = 0
		}
	}
	e.units += extra
	e.expires, e.end, e.window = expires, end, window
	t.refusals.forget(e.key)
	if !e.held {
		e.held = true
		sh.x.held = append(sh.x.held, e)
	}
}

// windowEnd is when the first of fixed windows ends after now.
func windowEnd(ws []Window, now time.Time) time.Time {
	us := now.UnixMicro()
	end := int64(math.MaxInt64)
	for _, w := range ws {
		if w.Calendar != nil {
			_, e := w.Calendar.Window(now)
			end = min(end, e.UnixMicro())
			continue
		}
		p := w.Period.Microseconds()
		end = min(end, (floorDiv(us, p)+1)*p)
	}
	return time.UnixMicro(end)
}
