package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	now   func() time.Time

	failures     atomic.Int64 // consecutive Redis failures
	failingSince atomic.Int64 // unix nanoseconds of the first of them
	skipUntil    atomic.Int64 // unix nanoseconds until which Redis is not asked

	mu        sync.Mutex
	lastErr   error
	lastErrAt time.Time

	stop chan struct{}
	done chan struct{}
}

// NewGuard wraps r, with opts for the LocalFallback state; Close stops the
// guard's background sweeping of that state.
func NewGuard(r *Redis, opts ...LocalOption) *Guard {
	g := &Guard{redis: r, local: NewLocal(nil, opts...), now: time.Now, stop: make(chan struct{}), done: make(chan struct{})}
	go g.sweep()
	return g
}

// LocalEntries is how many keys the LocalFallback state holds (Local.Len):
// reaching its bound means new tenants are admitted unlimited.
func (g *Guard) LocalEntries() int { return g.local.Len() }

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

// Outcome is the answer to one request of AllowAll.
type Outcome struct {
	Decision Decision
	// Err is nil, a Redis failure (Decision is then the failure mode's,
	// Degraded), or ErrInvalidRequest (Decision is then zero and refuses).
	Err error
}

// errUncheckedRequest answers a Request that Rule.Request did not build, or
// built for an empty tenant: a bug, never a configuration (config.Parse and
// NewRule check those once). The check costs one field read; the guard does
// not guess a decision: it asks neither Redis nor a failure mode, and the
// proxy counts the outcome as a check error (sluice_enforcer_check_errors_total), so
// a bug that lifts a limit is never silent.
var errUncheckedRequest = fmt.Errorf("%w: not built from a checked rule", ErrInvalidRequest)

// AllowAll decides every rule an HTTP request must pass. All of them go to
// Redis together, in one pipelined round trip, and each waits no longer than
// its own policy's timeout. out is reused when it has room.
func (g *Guard) AllowAll(ctx context.Context, reqs []Request, out []Outcome) []Outcome {
	out = slices.Grow(out[:0], len(reqs))[:len(reqs)]
	skip := g.skipping()
	var buf [8]pendingCheck
	pending := buf[:0]
	for i := range reqs {
		req := &reqs[i]
		switch {
		case !req.checked:
			out[i] = Outcome{Err: errUncheckedRequest}
		case skip:
			out[i] = Outcome{Decision: g.fallback(req), Err: ErrRedisUnavailable}
		default:
			out[i] = Outcome{}
			pending = append(pending, g.redis.submit(ctx, req, req.Cost))
		}
	}
	// Rules of one policy share its timeout: one deadline serves them all.
	start := g.now()
	var deadlines budgets
	defer deadlines.cancel()
	for i, p := 0, 0; i < len(reqs) && p < len(pending); i++ {
		if out[i].Err != nil {
			continue
		}
		deadline := deadlines.get(ctx, start.Add(reqs[i].Failure.timeout()))
		d, err := pending[p].wait(deadline)
		d, err = g.settle(ctx, &reqs[i], d, err)
		out[i] = Outcome{Decision: d, Err: err}
		p++
	}
	return out
}

// Refund gives back, best effort, what the admitted decisions of reqs took
// from Redis, when another rule refused the HTTP request they belong to. Only
// pass requests whose decision was admitted by Redis (not Degraded).
func (g *Guard) Refund(ctx context.Context, reqs ...Request) error {
	if len(reqs) == 0 || g.skipping() {
		return nil
	}
	// The requests may be of several policies: the longest timeout of them.
	timeout := reqs[0].Failure.timeout()
	for i := range reqs[1:] {
		timeout = max(timeout, reqs[i+1].Failure.timeout())
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return g.redis.Refund(ctx, reqs...)
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
		return Decision{Limit: w.Requests, Period: w.Period, Reset: now.Add(closedRetryAfter),
			RetryAfter: closedRetryAfter, Now: now, Degraded: true}
	case config.FailLocal:
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

// budgets hands out one deadline context per distinct deadline of a batch.
type budgets struct {
	at    time.Time
	ctx   context.Context
	first context.CancelFunc   // the usual case: one policy, one deadline
	more  []context.CancelFunc // rules of policies with other timeouts
}

func (b *budgets) get(parent context.Context, at time.Time) context.Context {
	if b.ctx == nil || !at.Equal(b.at) {
		ctx, cancel := context.WithDeadline(parent, at)
		b.at, b.ctx = at, ctx
		if b.first == nil {
			b.first = cancel
		} else {
			b.more = append(b.more, cancel)
		}
	}
	return b.ctx
}

func (b *budgets) cancel() {
	if b.first != nil {
		b.first()
	}
	for _, c := range b.more {
		c()
	}
}
