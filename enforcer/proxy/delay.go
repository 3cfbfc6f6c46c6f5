package proxy

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/request"
)

// Delay instead of refusal (a rule's onLimit.delay): a request whose rule booked its
// capacity for later (limiter.Decision.Delay) waits here for it, then goes
// on. Its waiting is bounded twice in each enforcer: per tenant and rule
// (the rule's maxQueued) and for the whole enforcer (Options.MaxDelayed).
// A request takes its place in the queue before it is decided: when a bound
// is full it is decided as without a delay, admitted only if capacity is
// there now and otherwise refused, booking nothing. A client that hangs up
// while waiting gives its reservation back to Redis and is not forwarded.

// DefaultMaxDelayed is the enforcer's bound on waiting requests
// (--delay-max-queued): each one holds a connection and a goroutine.
const DefaultMaxDelayed = 1000

// delayQueue counts the requests that hold a place: per bucket (a tenant
// under one rule) and in all.
type delayQueue struct {
	max int
	mu  sync.Mutex
	n   int
	by  map[limiter.Bucket]*queuedBucket
}

// queuedBucket is one bucket's requests holding a place, and the latest
// slot one of them waits for.
type queuedBucket struct {
	n      int
	latest time.Time
}

// Queue place outcomes, per check of a request.
const (
	delayNone   uint8 = iota // the check's rule has no delay, or it never held a place
	delayQueued              // it holds a place
	delayFull                // a bound was full: decided without its delay
)

// enter takes a place for bucket b, whose rule lets perBucket wait at once,
// and reports the places held now; -1 and which bound was full otherwise.
func (q *delayQueue) enter(b limiter.Bucket, perBucket int) (n int, scope string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n >= q.max {
		return -1, "enforcer"
	}
	e := q.by[b]
	if e == nil {
		e = &queuedBucket{}
		if q.by == nil {
			q.by = map[limiter.Bucket]*queuedBucket{}
		}
		q.by[b] = e
	} else if e.n >= perBucket {
		return -1, "tenant"
	}
	e.n++
	q.n++
	return q.n, ""
}

// booked records the slot a request holding b's place waits for.
func (q *delayQueue) booked(b limiter.Bucket, slot time.Time) {
	q.mu.Lock()
	if e := q.by[b]; e != nil && slot.After(e.latest) {
		e.latest = slot
	}
	q.mu.Unlock()
}

// leave gives b's place back, and reports the places held now.
func (q *delayQueue) leave(b limiter.Bucket) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e := q.by[b]; e != nil {
		if e.n--; e.n <= 0 {
			delete(q.by, b)
		}
	}
	q.n--
	return q.n
}

// Waiting is how many of bucket b's requests hold a place in this
// enforcer's queue, and the latest slot one of them waits for (zero when
// none has been booked yet): for /debug/tenant.
func (h *Handler) Waiting(b limiter.Bucket) (n int, latest time.Time) {
	h.delays.mu.Lock()
	defer h.delays.mu.Unlock()
	if e := h.delays.by[b]; e != nil {
		return e.n, e.latest
	}
	return 0, time.Time{}
}

func (h *Handler) delayRecorder() engine.DelayRecorder {
	dr, _ := h.rec.(engine.DelayRecorder)
	return dr
}

// enqueue takes a queue place for each check of a delay rule before it is
// decided; a check that gets none (a bound is full, or its policy only
// counts) is decided without its delay.
func (h *Handler) enqueue(st *requestState) {
	for i := range st.checks {
		c := &st.checks[i]
		if c.Request.Delay == 0 {
			continue
		}
		if len(st.delays) == 0 {
			st.delays = append(st.delays[:0], make([]uint8, len(st.checks))...)
		}
		if c.Policy.DryRun {
			// A DryRun policy never holds a request: its rule decides as
			// one without a delay, every request alike, leases included.
			c.Request.Delay = 0
			continue
		}
		n, scope := h.delays.enter(c.Request.Bucket, c.Rule.DelayMaxQueued)
		if n < 0 {
			c.Request = c.Request.WithoutDelay()
			st.delays[i] = delayFull
			if dr := h.delayRecorder(); dr != nil {
				dr.DelayQueueFull(c.Policy, c.Rule, scope)
			}
			continue
		}
		st.delays[i] = delayQueued
		h.queueLength(n)
	}
}

// dequeue gives back the queue places of st's checks whose decision does
// not wait (all of them when keepWaiting is false), and returns the wait
// of the request: the longest of its checks'.
func (h *Handler) dequeue(st *requestState, keepWaiting bool) (wait time.Duration) {
	for i, m := range st.delays {
		if m != delayQueued {
			continue
		}
		d := &st.outs[i].Decision
		if keepWaiting && st.outs[i].Err == nil && d.Allowed && d.Delay > 0 {
			wait = max(wait, d.Delay)
			h.delays.booked(st.checks[i].Request.Bucket, d.Now.Add(d.Delay))
			continue
		}
		st.delays[i] = delayNone
		h.queueLength(h.delays.leave(st.checks[i].Request.Bucket))
	}
	return wait
}

func (h *Handler) queueLength(n int) {
	if dr := h.delayRecorder(); dr != nil {
		dr.DelayQueueLength(n)
	}
}

// await holds the admitted request until its reservations are due. It
// reports false when the request must not go on: its client hung up, or
// its gRPC deadline ends before the slot; its reservations (and whatever
// its other checks took) are then given back, and a gRPC call is answered.
func (h *Handler) await(ctx context.Context, w http.ResponseWriter, r *http.Request, snap *inService, st *requestState, wait time.Duration) bool {
	defer h.dequeue(st, false)
	dr := h.delayRecorder()
	if deadline, ok := callDeadline(r); !ok || wait < deadline {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-timer.C:
			if dr != nil {
				for i, m := range st.delays {
					if m == delayQueued {
						dr.Delayed(st.checks[i].Policy, st.checks[i].Rule, st.outs[i].Decision.Delay)
					}
				}
			}
			return true
		case <-r.Context().Done():
		}
	} else {
		// the call would time out waiting: refuse it now rather than hold it
		defer h.refuseLate(w, r, st, deadline)
	}
	h.giveBack(ctx, snap, st)
	if dr != nil {
		for i, m := range st.delays {
			if m == delayQueued {
				dr.DelayCancelled(st.checks[i].Policy, st.checks[i].Rule)
			}
		}
	}
	return false
}

// giveBack returns what every admitted check of st took, reservations
// included: the request is not forwarded.
func (h *Handler) giveBack(ctx context.Context, snap *inService, st *requestState) {
	h.refund(ctx, snap, st)
}

// refuseLate answers a gRPC call whose deadline ends before its slot, as
// the rule that delayed it longest would have refused it.
func (h *Handler) refuseLate(w http.ResponseWriter, r *http.Request, st *requestState, deadline time.Duration) {
	pick := -1
	for i, m := range st.delays {
		if m == delayQueued && (pick < 0 || st.outs[i].Decision.Delay > st.outs[pick].Decision.Delay) {
			pick = i
		}
	}
	if pick < 0 {
		return
	}
	d := st.outs[pick].Decision
	d.RetryAfter = d.Delay
	p := refusal(&st.checks[pick], &d)
	p.Detail += fmt.Sprintf(" Its capacity was %s away, beyond the call's deadline of %s.", d.Delay.Round(time.Millisecond), deadline.Round(time.Millisecond))
	writeProblem(w, r, p)
}

// queueFullDetail completes the problem of a request refused by check i
// because its wait queue was full.
func queueFullDetail(st *requestState, i int, p *Problem) {
	if i < len(st.delays) && st.delays[i] == delayFull {
		p.Detail += " Its wait queue was full, so it was not delayed."
	}
}

// callDeadline is the time left of a gRPC call (its grpc-timeout header),
// ok false for other requests and calls without one.
func callDeadline(r *http.Request) (left time.Duration, ok bool) {
	v := r.Header["Grpc-Timeout"]
	if len(v) != 1 || !request.IsGRPC(r) || len(v[0]) < 2 || len(v[0]) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[0][:len(v[0])-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	unit, known := grpcTimeoutUnits[v[0][len(v[0])-1]]
	if !known {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// grpcTimeoutUnits are the units of a grpc-timeout value.
var grpcTimeoutUnits = map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second,
	'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}
