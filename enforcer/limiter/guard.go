package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// ErrRedisUnavailable is returned, with the failure mode's decision, while
// Redis is considered down and decisions skip it without waiting.
var ErrRedisUnavailable = errors.New("redis unavailable")

const (
	// tripAfter consecutive Redis failures spread over at least tripWindow
	// without a success make the guard stop asking Redis for probeInterval,
	// so a hung Redis costs one timeout per interval instead of one per
	// request. The window keeps one stalled batch, whose requests all time
	// out at once, from tripping a Redis that is answering.
	tripAfter     = 3
	tripWindow    = 250 * time.Millisecond
	probeInterval = 500 * time.Millisecond
	// closedRetryAfter is what a fail-closed refusal asks clients to wait.
	closedRetryAfter = time.Second
	sweepInterval    = 10 * time.Second
)

// Guard is the Limiter an enforcer uses: it decides with Redis within each
// policy's timeout and, when Redis fails, lets the policy's failure mode
// decide: admit (Open), refuse (Closed), or limit in-process (LocalFallback).
type Guard struct {
	redis *Redis
	local *Local
	// clock dates leases and cached decisions; cache holds bans and
	// cached refusals alike.
	clock  clock
	cache  *decisionCache
	leases *leases
	bans   banCounts
	// slots are the Concurrency rules' slots held (slots.go).
	slots *slotTable
	now   func() time.Time

	failures     atomic.Int64 // consecutive Redis failures
	failingSince atomic.Int64 // unix nanoseconds of the first of them
	skipUntil    atomic.Int64 // unix nanoseconds until which Redis is not asked

	mu        sync.Mutex
	lastErr   error
	lastErrAt time.Time

	stop chan struct{}
	done chan struct{}
	// prefetches are lease requests in flight, which Close waits for;
	// none starts once closing is set (under prefetchMu).
	prefetchMu sync.Mutex
	closing    bool
	prefetches sync.WaitGroup
}

// NewGuard wraps r, with opts for the LocalFallback state; Close stops the
// guard's background sweeping of that state.
func NewGuard(r *Redis, opts ...LocalOption) *Guard {
	return newGuardWith(r, newMonotonic(), opts...)
}

// newGuardWith is NewGuard whose leases and cached decisions follow c.
func newGuardWith(r *Redis, c clock, opts ...LocalOption) *Guard {
	cache := newDecisionCache(c)
	g := &Guard{redis: r, local: NewLocal(nil, opts...), clock: c, cache: cache, leases: newLeases(c, cache),
		slots: newSlotTable(), now: time.Now, stop: make(chan struct{}), done: make(chan struct{})}
	go g.sweep()
	return g
}

// LocalEntries is how many keys the LocalFallback state holds (Local.Len):
// reaching its bound means new tenants are admitted unlimited.
func (g *Guard) LocalEntries() int { return g.local.Len() }

// Close stops background work and gives back what is left of the leases
// it holds. It does not close the Redis limiter.
func (g *Guard) Close() {
	close(g.stop)
	<-g.done
	g.prefetchMu.Lock()
	g.closing = true
	g.prefetchMu.Unlock()
	g.prefetches.Wait()
	g.leases.giveBack(context.Background(), g.redis, g.leases.release(g.clock.now()))
	g.slots.close()
}

// ReturnLeases gives back every lease and forgets every cached refusal, waiting
// no longer than returns take (returnTimeout): for a new configuration,
// whose limits the leases were not taken under.
func (g *Guard) ReturnLeases(ctx context.Context) {
	g.leases.giveBack(ctx, g.redis, g.leases.release(g.clock.now()))
	g.cache.clear()
}

// LeaseCounts are the lease counters of policy (its name), nil before any
// of its rules leased or was decided.
func (g *Guard) LeaseCounts(policy string) *LeaseCounts {
	if c, ok := g.leases.stats.Load(policy); ok {
		return c.(*LeaseCounts)
	}
	return nil
}

// LeasePolicies are the policies with lease counters.
func (g *Guard) LeasePolicies() []string {
	var ps []string
	g.leases.stats.Range(func(k, _ any) bool {
		ps = append(ps, k.(string))
		return true
	})
	return ps
}

func (g *Guard) sweep() {
	defer close(g.done)
	t := time.NewTicker(leaseTick)
	defer t.Stop()
	nextSweep := g.now().Add(sweepInterval)
	var returns []pendingReturn
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		now, idle := g.now(), false
		if !now.Before(nextSweep) {
			g.local.Sweep()
			g.cache.sweep(g.clock.now())
			idle, nextSweep = true, now.Add(sweepInterval)
		}
		returns = g.leases.ended(g.clock.now(), idle, returns[:0])
		// one batch in flight at a time: returns are bounded by the table
		g.leases.giveBack(context.Background(), g.redis, returns)
		clear(returns)
	}
}

// settle records the outcome of a Redis decision and lets the failure mode
// decide when Redis failed. A caller that gave up (a client hanging up)
// says nothing about Redis, and does not count as its failure.
func (g *Guard) settle(caller context.Context, req *Request, d Decision, err error) (Decision, error) {
	if err != nil {
		if caller.Err() == nil || !errors.Is(err, caller.Err()) {
			g.failed(err)
		}
		return g.fallback(req), err
	}
	g.succeeded()
	return d, nil
}

// skipping reports whether Redis failed often enough recently that
// decisions go straight to the failure modes.
func (g *Guard) skipping() bool {
	until := g.skipUntil.Load()
	return until != 0 && g.now().UnixNano() < until
}

func (g *Guard) succeeded() {
	if g.failures.Load() != 0 {
		g.failures.Store(0)
		g.skipUntil.Store(0)
	}
}

func (g *Guard) failed(err error) {
	now := g.now()
	n := g.failures.Add(1)
	if n == 1 {
		g.failingSince.Store(now.UnixNano())
	}
	if n >= tripAfter && now.UnixNano()-g.failingSince.Load() >= int64(tripWindow) {
		g.skipUntil.Store(now.Add(probeInterval).UnixNano())
	}
	g.mu.Lock()
	g.lastErr, g.lastErrAt = err, now
	g.mu.Unlock()
}

// fallback is the policy's failure mode deciding req.
func (g *Guard) fallback(req *Request) Decision {
	now := g.now()
	w := req.Windows[0]
	switch req.Failure.Mode {
	case config.FailClosed:
		return Decision{Limit: w.Requests, Period: w.Length(now), Calendar: w.Calendar, Reset: now.Add(closedRetryAfter),
			RetryAfter: closedRetryAfter, Now: now, Degraded: true}
	case config.FailLocal:
		if req.Algorithm == Concurrency {
			return g.slots.local.take(req, now)
		}
		share := *req
		share.Windows = make([]Window, len(req.Windows))
		for i, w := range req.Windows {
			share.Windows[i] = req.Failure.share(w, req.Cost)
		}
		allowed, at, results := g.local.Check(&share)
		d := decide(&share, allowed, at, results)
		d.Degraded = true
		return d
	default: // config.FailOpen; Parse refuses other modes this enforcer does not know
		return Decision{Allowed: true, Limit: w.Requests, Period: w.Length(now), Calendar: w.Calendar, Remaining: w.Requests,
			Reset: now, Now: now, Degraded: true}
	}
}

// Health is what the guard knows of Redis.
type Health struct {
	// Reachable is false once a decision has failed and none has succeeded since.
	Reachable bool
	// ConsecutiveFailures counts failed decisions since the last success.
	ConsecutiveFailures int64
	// LastError and LastErrorAt describe the most recent failure.
	LastError   string
	LastErrorAt time.Time
}

// Health reports the Redis health seen by recent decisions.
func (g *Guard) Health() Health {
	h := Health{ConsecutiveFailures: g.failures.Load()}
	h.Reachable = h.ConsecutiveFailures == 0
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lastErr != nil {
		h.LastError, h.LastErrorAt = g.lastErr.Error(), g.lastErrAt
	}
	return h
}

// Ping checks that Redis answers within timeout, and records the outcome in
// Health, so an idle enforcer also notices Redis going and coming back.
func (g *Guard) Ping(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := g.redis.client.Ping(ctx).Err(); err != nil {
		err = fmt.Errorf("redis ping: %w", err)
		g.failed(err)
		return err
	}
	g.succeeded()
	return nil
}
