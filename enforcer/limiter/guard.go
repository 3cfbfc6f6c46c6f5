package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrRedisUnavailable is returned, with the failure mode's decision, while
// Redis is considered down and decisions skip it without waiting.
var ErrRedisUnavailable = errors.New("redis unavailable")

const (
	// tripAfter consecutive Redis failures make the guard stop asking Redis
	// for probeInterval, so a hung Redis costs one timeout per interval
	// instead of one per request.
	tripAfter     = 3
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
	now   func() time.Time

	failures  atomic.Int64 // consecutive Redis failures
	skipUntil atomic.Int64 // unix nanoseconds until which Redis is not asked

	mu        sync.Mutex
	lastErr   error
	lastErrAt time.Time

	stop chan struct{}
	done chan struct{}
}

// NewGuard wraps r; Close stops the guard's background sweeping of local state.
func NewGuard(r *Redis) *Guard {
	g := &Guard{redis: r, local: NewLocal(nil), now: time.Now, stop: make(chan struct{}), done: make(chan struct{})}
	go g.sweep()
	return g
}

// Close stops background work. It does not close the Redis limiter.
func (g *Guard) Close() {
	close(g.stop)
	<-g.done
}

func (g *Guard) sweep() {
	defer close(g.done)
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			g.local.Sweep()
		}
	}
}

// Allow decides req with Redis, or by its failure mode when Redis fails; in
// that case the error says why and the decision is Degraded.
func (g *Guard) Allow(ctx context.Context, req Request) (Decision, error) {
	if err := req.Validate(); err != nil {
		return Decision{}, err
	}
	if until := g.skipUntil.Load(); until != 0 && g.now().UnixNano() < until {
		return g.fallback(&req), ErrRedisUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, req.Failure.timeout())
	d, err := g.redis.check(ctx, &req, req.Cost)
	cancel()
	if err == nil {
		g.succeeded()
		return d, nil
	}
	g.failed(err)
	return g.fallback(&req), err
}

func (g *Guard) succeeded() {
	if g.failures.Load() != 0 {
		g.failures.Store(0)
		g.skipUntil.Store(0)
	}
}

func (g *Guard) failed(err error) {
	now := g.now()
	if g.failures.Add(1) >= tripAfter {
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
	case FailClosed:
		return Decision{Limit: w.Requests, Period: w.Period, Reset: now.Add(closedRetryAfter),
			RetryAfter: closedRetryAfter, Now: now, Degraded: true}
	case FailLocal:
		share := *req
		share.Windows = make([]Window, len(req.Windows))
		for i, w := range req.Windows {
			share.Windows[i] = req.Failure.share(w, req.Cost)
		}
		allowed, at, results := g.local.Check(&share)
		d := decide(&share, allowed, at, results)
		d.Degraded = true
		return d
	default: // FailOpen, and a mode this enforcer does not know
		return Decision{Allowed: true, Limit: w.Requests, Period: w.Period, Remaining: w.Requests,
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
