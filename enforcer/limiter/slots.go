package limiter

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// slot is what an admitted request of a Concurrency rule holds, from
// Admission.Hold until Admission.Release: Cost slots in Redis, or in this
// enforcer's LocalFallback when Redis was away. The zero slot holds
// nothing.
type slot struct {
	taken int64 // µs, Redis' clock: the decision's CountedAt
	start time.Time
	// held: the slot holds something; local: in the LocalFallback.
	held, local bool
}

// slotTable is what a Guard knows of the slots its requests hold: the
// buckets it holds slots in (to renew them), the give-backs not yet sent,
// the LocalFallback's slots, and, per rule, how long requests hold them.
type slotTable struct {
	mu      sync.Mutex
	buckets map[Bucket]*heldBucket
	// returns are give-backs waiting for the flusher, in order; failed
	// ones are sent again at the next renewal, at most maxReturns.
	returns []slotReturn
	local   localSlots
	// queues are, per bucket, the requests waiting in arrival order for
	// a slot this enforcer's requests give back (onLimit.delay).
	queues map[Bucket][]chan slot
	// held and refused count per policy (their name): slots in use,
	// refusals.
	stats sync.Map // string -> *SlotCounts
	// durations are the rules' recent holding times (ruleKey ->
	// *holdTime), for a refusal's Retry-After.
	durations sync.Map

	start   sync.Once
	running atomic.Bool
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// maxReturns bounds the give-backs kept while Redis does not answer them.
const maxReturns = 100_000

type heldBucket struct {
	req Request
	n   int64
	// gen is the generation of this enforcer's fields in Redis as the
	// last renewal found it (math.MaxInt64 when they were gone): slots
	// taken before it count no more there.
	gen int64
}

type slotReturn struct {
	req   Request
	n     int64
	taken int64
	// queued is when the request holding the slot ended; gen its
	// bucket's generation then.
	queued time.Time
	gen    int64
}

func newSlotTable() *slotTable {
	return &slotTable{buckets: make(map[Bucket]*heldBucket), queues: make(map[Bucket][]chan slot), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// Hold makes the slots the admission took held by this enforcer until
// Release, renewing them in Redis meanwhile, and reports whether it holds
// any. It holds nothing for other algorithms, refusals, and a failure
// mode's admission other than LocalFallback's (Open admits without a
// slot).
func (a *Admission) Hold() bool {
	req, d, g := &a.req, &a.Decision, a.g
	if req.Algorithm != Concurrency || !d.Allowed || g == nil || a.slot.held {
		return a.slot.held
	}
	if d.Degraded && req.Failure.Mode != config.FailLocal {
		return false
	}
	a.slot = slot{taken: d.CountedAt.UnixMicro(), start: time.Now(), held: true, local: d.Degraded}
	t := g.slots
	t.counts(req.Bucket.Policy).InUse.Add(req.Cost)
	if a.slot.local {
		return true
	}
	t.start.Do(func() {
		t.running.Store(true)
		go t.run(g.redis)
	})
	t.mu.Lock()
	if b := t.buckets[req.Bucket]; b != nil {
		b.n += req.Cost
	} else {
		held := *req
		held.f.ban = nil
		t.buckets[req.Bucket] = &heldBucket{req: held, n: req.Cost}
	}
	t.mu.Unlock()
	return true
}

// Release gives back the slots the admission holds: at once in the
// LocalFallback, to Redis in the background, batched with the other
// give-backs. It also times the request for the rule's Retry-After.
func (a *Admission) Release() {
	s := &a.slot
	if !s.held {
		return
	}
	s.held = false
	req, t := &a.req, a.g.slots
	t.observe(req, time.Since(s.start))
	t.counts(req.Bucket.Policy).InUse.Add(-req.Cost)
	if s.local {
		t.local.give(req.Bucket, req.Cost)
		return
	}
	t.mu.Lock()
	if q := t.queues[req.Bucket]; len(q) > 0 {
		// the first request waiting for a slot here takes this one over:
		// still held, still counted in Redis
		t.dequeue(req.Bucket, 0)
		t.mu.Unlock()
		t.counts(req.Bucket.Policy).InUse.Add(req.Cost)
		q[0] <- slot{taken: s.taken, start: time.Now(), held: true}
		return
	}
	var gen int64
	if b := t.buckets[req.Bucket]; b != nil {
		gen = b.gen
		if b.n -= req.Cost; b.n <= 0 {
			delete(t.buckets, req.Bucket)
		}
	}
	if len(t.returns) < maxReturns {
		given := *req
		given.f.ban = nil
		t.returns = append(t.returns, slotReturn{req: given, n: req.Cost, taken: s.taken, queued: time.Now(), gen: gen})
	}
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// dequeue removes the i-th waiter of b's queue; t.mu is held.
func (t *slotTable) dequeue(b Bucket, i int) {
	t.counts(b.Policy).Waiting.Add(-1)
	q := t.queues[b]
	if len(q) == 1 {
		delete(t.queues, b)
		return
	}
	t.queues[b] = append(q[:i:i], q[i+1:]...)
}

// ErrSlotQueueFull answers AwaitSlot when the rule's onLimit.delay
// maxQueued of the tenant's requests already wait here.
var ErrSlotQueueFull = errors.New("the tenant's requests waiting for a slot fill the queue")

// AwaitSlot waits, up to the rule's SlotWait, for a slot of a refused
// admission's bucket that a request of this enforcer gives back, in
// arrival order; once handed one, the admission holds it and its
// decision admits. Slots other enforcers give back are not seen: the
// order is this enforcer's. It returns false when the wait ends first,
// when the queue is full (ErrSlotQueueFull) or when ctx ends (ctx.Err()).
func (a *Admission) AwaitSlot(ctx context.Context) (bool, error) {
	req, g := &a.req, a.g
	if req.Algorithm != Concurrency || req.f.slotWait <= 0 || g == nil || a.slot.held {
		return false, nil
	}
	t := g.slots
	ch := make(chan slot, 1)
	t.mu.Lock()
	if len(t.queues[req.Bucket]) >= max(req.f.slotQueue, 1) {
		t.mu.Unlock()
		return false, ErrSlotQueueFull
	}
	t.queues[req.Bucket] = append(t.queues[req.Bucket], ch)
	t.counts(req.Bucket.Policy).Waiting.Add(1)
	t.mu.Unlock()
	timer := time.NewTimer(req.f.slotWait)
	defer timer.Stop()
	var err error
	select {
	case s := <-ch:
		a.handed(s)
		return true, nil
	case <-timer.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	t.mu.Lock()
	for i, c := range t.queues[req.Bucket] {
		if c == ch {
			t.dequeue(req.Bucket, i)
			t.mu.Unlock()
			return false, err
		}
	}
	t.mu.Unlock()
	// handed over as the wait ended: taken, or passed on when the caller
	// is gone
	a.slot = <-ch
	if err != nil {
		a.Release()
		return false, err
	}
	a.handed(a.slot)
	return true, nil
}

// handed makes the admission hold s, handed over as it waited, and admit.
func (a *Admission) handed(s slot) {
	a.slot = s
	d := &a.Decision
	d.Allowed, d.Remaining, d.RetryAfter, d.Reset = true, 0, 0, time.Now()
}

// reuseWithin bounds the age of a give-back a new request may take over:
// well within the expiry, so the slot still counts in Redis.
const reuseWithin = time.Second

// reuse takes over, for req, a slot of its bucket that a request of this
// enforcer gave back and the flusher has not sent yet: the slot still
// counts in Redis, so the request holds it without a Redis call, and a
// tenant's next request right after one ended is not refused for a
// give-back still on its way. A slot taken before the generation the last
// renewal found was dropped in Redis (expired, or lost with its data) and
// is not taken over: a slot lost since that renewal may be, until the next
// one (SlotRenewal).
func (t *slotTable) reuse(req *Request, now time.Time) (Decision, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.returns) - 1; i >= 0; i-- {
		r := &t.returns[i]
		if r.req.Bucket != req.Bucket || r.n != req.Cost || now.Sub(r.queued) > reuseWithin {
			continue
		}
		gen := r.gen
		if b := t.buckets[req.Bucket]; b != nil {
			gen = max(gen, b.gen)
		}
		if r.taken < gen {
			continue // dropped in Redis: the give-back goes, ignored there
		}
		w := req.Windows[0]
		d := Decision{Allowed: true, Limit: w.Requests, Period: w.Period, Now: now, Reset: now,
			CountedAt: time.UnixMicro(r.taken), Local: true}
		t.returns = append(t.returns[:i], t.returns[i+1:]...)
		return d, true
	}
	return Decision{}, false
}
