package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

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

// CountRefusal counts the admission's refusal by its Concurrency rule.
func (a *Admission) CountRefusal() {
	if a.g != nil {
		a.g.slots.counts(a.req.Bucket.Policy).Refused.Add(1)
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

// SlotsWaiting is how many of the tenant's requests of req's rule wait
// here for a slot.
func (g *Guard) SlotsWaiting(req *Request) int {
	g.slots.mu.Lock()
	defer g.slots.mu.Unlock()
	return len(g.slots.queues[req.Bucket])
}
