package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

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

// SlotCounts are a policy's Concurrency counters on this enforcer.
type SlotCounts struct {
	// InUse is the slots its requests hold now (Redis and LocalFallback).
	InUse atomic.Int64
	// Refused counts the requests its Concurrency rules refused (or, in
	// DryRun, would have).
	Refused atomic.Int64
	// Waiting is the requests waiting here for a slot (onLimit.delay).
	Waiting atomic.Int64
}

func newSlotTable() *slotTable {
	return &slotTable{buckets: make(map[Bucket]*heldBucket), queues: make(map[Bucket][]chan slot), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
}

func (t *slotTable) counts(policy string) *SlotCounts {
	if c, ok := t.stats.Load(policy); ok {
		return c.(*SlotCounts)
	}
	c, _ := t.stats.LoadOrStore(policy, new(SlotCounts))
	return c.(*SlotCounts)
}

// SlotCounts are the Concurrency counters of policy (its name), nil before
// any of its Concurrency rules held or refused a slot here.
func (g *Guard) SlotCounts(policy string) *SlotCounts {
	if c, ok := g.slots.stats.Load(policy); ok {
		return c.(*SlotCounts)
	}
	return nil
}

// SlotPolicies are the policies with Concurrency counters.
func (g *Guard) SlotPolicies() []string {
	var ps []string
	g.slots.stats.Range(func(k, _ any) bool {
		ps = append(ps, k.(string))
		return true
	})
	slices.Sort(ps)
	return ps
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

// CountRefusal counts the admission's refusal by its Concurrency rule.
func (a *Admission) CountRefusal() {
	if a.g != nil {
		a.g.slots.counts(a.req.Bucket.Policy).Refused.Add(1)
	}
}

// run sends the give-backs as they come, one batch at a time, and renews
// the slots held every SlotRenewal, until close.
func (t *slotTable) run(r *Redis) {
	defer close(t.done)
	tick := time.NewTicker(SlotRenewal)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			t.flush(r)
			return
		case <-t.wake:
			// gather the give-backs of a burst into one batch
			time.Sleep(flushLinger)
			t.flush(r)
		case <-tick.C:
			t.renew(r)
			t.flush(r)
		}
	}
}

// flush sends the waiting give-backs in one pipelined round trip; the ones
// that fail wait for the next try.
func (t *slotTable) flush(r *Redis) {
	t.mu.Lock()
	batch := t.returns
	t.returns = nil
	t.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	reqs := make([]Request, len(batch))
	units := make([]int64, len(batch))
	taken := make([]int64, len(batch))
	for i, b := range batch {
		reqs[i], units[i], taken[i] = b.req, b.n, b.taken
	}
	ctx, cancel := context.WithTimeout(context.Background(), slotCallTimeout)
	defer cancel()
	var failed []slotReturn
	for i, err := range r.pipelined(ctx, reqs, units, taken) {
		// Sent again only when Redis surely did not run it: a give-back
		// whose reply alone was lost (a timeout, a reset connection) may
		// have run, and running twice would free a slot still held. One
		// that is not sent again leaves its slot counted until this
		// enforcer holds none of the tenant's slots for SlotExpiry.
		if err != nil && unsent(err) {
			failed = append(failed, batch[i])
		}
	}
	if len(failed) > 0 {
		t.mu.Lock()
		// the generation in Redis ignores a give-back once its slot was
		// dropped; newer ones after it
		t.returns = append(failed, t.returns...)
		if len(t.returns) > maxReturns {
			t.returns = t.returns[:maxReturns]
		}
		t.mu.Unlock()
	}
}

// flushLinger is how long the flusher waits for more give-backs once one
// comes: a slot is free again in Redis at most that much later, and a busy
// enforcer sends its give-backs in a few large batches instead of many
// small ones.
const flushLinger = time.Millisecond

// slotCallTimeout bounds a batch of give-backs or renewals.
const slotCallTimeout = 2 * time.Second

// renew pushes back the expiry of every bucket this enforcer holds slots
// in, in one pipelined round trip.
func (t *slotTable) renew(r *Redis) {
	t.mu.Lock()
	reqs := make([]*Request, 0, len(t.buckets))
	for _, b := range t.buckets {
		reqs = append(reqs, &b.req)
	}
	t.mu.Unlock()
	gens := make([]int64, len(reqs))
	if len(reqs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), slotCallTimeout)
	defer cancel()
	calls := make([]scriptCall, len(reqs))
	var stack [192]byte
	for i, req := range reqs {
		key := string(req.Bucket.appendKey(stack[:0], Concurrency, req.Windows[0].Period))
		calls[i] = r.send(ctx, []any{"evalsha", renewScript.shaArg, 1, key, enforcerID, req.Windows[0].Period.Milliseconds()})
	}
	for i, c := range calls {
		raw, err := r.receive(ctx, renewScript, c)
		if err != nil {
			gens[i] = -1 // unknown; the next renewal tries again
			continue
		}
		if gens[i], _ = raw.(int64); gens[i] == 0 {
			gens[i] = math.MaxInt64 // its fields are gone, and its slots with them
		}
	}
	t.mu.Lock()
	for i, req := range reqs {
		if b := t.buckets[req.Bucket]; b != nil && gens[i] >= 0 {
			b.gen = gens[i]
		}
	}
	t.mu.Unlock()
}

// close stops the background work after a last flush.
func (t *slotTable) close() {
	t.start.Do(func() {}) // no start after this one
	if !t.running.Load() {
		return
	}
	close(t.stop)
	select {
	case <-t.done:
	case <-time.After(2 * slotCallTimeout):
	}
}

// ruleKey names a rule of a policy for its holding times.
type ruleKey struct{ namespace, policy, rule string }

// holdTime is an exponentially weighted mean of a rule's holding times.
type holdTime struct {
	mu   sync.Mutex
	mean time.Duration
}

// holdWeight is the weight of the newest holding time in the mean.
const holdWeight = 0.2

func (t *slotTable) observe(req *Request, d time.Duration) {
	k := ruleKey{req.Bucket.Namespace, req.Bucket.Policy, req.Bucket.Rule}
	v, ok := t.durations.Load(k)
	if !ok {
		v, _ = t.durations.LoadOrStore(k, &holdTime{mean: d})
	}
	h := v.(*holdTime)
	h.mu.Lock()
	h.mean += time.Duration(holdWeight * float64(d-h.mean))
	h.mu.Unlock()
}

// SlotWait is how long a request refused by req's Concurrency rule should
// wait before trying again: the rule's recent mean holding time on this
// enforcer, rounded up to a whole second, at least 1 s.
func (g *Guard) SlotWait(req *Request) time.Duration {
	wait := time.Second
	if v, ok := g.slots.durations.Load(ruleKey{req.Bucket.Namespace, req.Bucket.Policy, req.Bucket.Rule}); ok {
		h := v.(*holdTime)
		h.mu.Lock()
		mean := h.mean
		h.mu.Unlock()
		wait = max(wait, (mean + time.Second - 1).Truncate(time.Second))
	}
	return wait
}

// Holder is an enforcer holding slots of a tenant: its name, how many, and
// until when they count without renewal.
type Holder struct {
	Enforcer string    `json:"enforcer"`
	Slots    int64     `json:"slots"`
	Expires  time.Time `json:"expires"`
	// Local is set for this enforcer's LocalFallback slots, which Redis
	// does not count.
	Local bool `json:"local,omitempty"`
}

// SlotHolders lists the enforcers holding slots of req's bucket in Redis,
// by name, expired ones left out, and this enforcer's LocalFallback slots.
func (g *Guard) SlotHolders(ctx context.Context, req *Request) ([]Holder, error) {
	if req.Algorithm != Concurrency || len(req.Windows) != 1 {
		return nil, errors.New("not a Concurrency rule")
	}
	var holders []Holder
	if n := g.slots.local.held(req.Bucket); n > 0 {
		holders = append(holders, Holder{Enforcer: enforcerID, Slots: n, Local: true})
	}
	key := string(req.Bucket.appendKey(nil, Concurrency, req.Windows[0].Period))
	fields, err := g.redis.client.HGetAll(ctx, key).Result()
	if err != nil {
		return holders, fmt.Errorf("redis slots of %s: %w", req.Bucket, err)
	}
	now := time.Now()
	for f, v := range fields {
		who, ok := strings.CutPrefix(f, "c|")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		x, _ := strconv.ParseInt(fields["x|"+who], 10, 64)
		if exp := time.UnixMicro(x); n > 0 && exp.After(now) {
			holders = append(holders, Holder{Enforcer: who, Slots: n, Expires: exp})
		}
	}
	slices.SortFunc(holders, func(a, b Holder) int { return strings.Compare(a.Enforcer, b.Enforcer) })
	return holders, nil
}

// pipelined gives back units[i], taken at taken[i], to the bucket of
// reqs[i], all in one explicit pipeline of its own (a round trip apart
// from the request path's autopipelined decisions), and reports each one's
// error. A Redis without the script loads it with EVAL.
func (r *Redis) pipelined(ctx context.Context, reqs []Request, units, taken []int64) []error {
	pipe := r.client.Pipeline()
	cmds := make([]onceCmd, len(reqs))
	args := make([][]any, len(reqs))
	scripts := make([]algorithmScript, len(reqs))
	for i := range reqs {
		scripts[i], args[i] = evalSHA(&reqs[i], -units[i], taken[i], taken[i])
		// sent once: a give-back sent twice would free slots still held
		cmds[i] = newOnceCmd(ctx, args[i]...)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx)
	errs := make([]error, len(reqs))
	var retry redis.Pipeliner
	again := map[int]onceCmd{}
	for i, c := range cmds {
		if err := c.Err(); redis.HasErrorPrefix(err, "NOSCRIPT") {
			if retry == nil {
				retry = r.client.Pipeline()
			}
			again[i] = newOnceCmd(ctx, scripts[i].eval(args[i])...)
			_ = retry.Process(ctx, again[i])
		} else if err != nil {
			errs[i] = fmt.Errorf("redis give-back %s: %w", reqs[i].Bucket, err)
		}
	}
	if retry != nil {
		_, _ = retry.Exec(ctx)
		for i, c := range again {
			if err := c.Err(); err != nil {
				errs[i] = fmt.Errorf("redis give-back %s: %w", reqs[i].Bucket, err)
			}
		}
	}
	return errs
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

// SlotsWaiting is how many of the tenant's requests of req's rule wait
// here for a slot.
func (g *Guard) SlotsWaiting(req *Request) int {
	g.slots.mu.Lock()
	defer g.slots.mu.Unlock()
	return len(g.slots.queues[req.Bucket])
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
