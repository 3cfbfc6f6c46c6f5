package limiter

import (
	"hash/maphash"
	"math"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// WindowResult is one window's answer to a check.
type WindowResult struct {
	// Remaining is below zero when the window holds more than its limit:
	// a debt (charge.lua), a token bucket's reservation (delay.go), or
	// what a lowered limit left.
	Remaining int64
	Reset     time.Time     // when the window is fully replenished
	Retry     time.Duration // wait until the request's cost fits this window; 0 when it does
}

// DefaultLocalMaxEntries bounds the keys a Local holds when NewLocal is given
// no LocalMaxEntries option.
const DefaultLocalMaxEntries = 100_000

// localEps is the scripts' eps: it absorbs float rounding, far below one
// request.
const localEps = 1e-9

// Local is an in-process limiter with the same algorithms as the Redis scripts,
// for the LocalFallback failure mode: each replica limits on its own while
// Redis is unreachable. Every value it answers (remaining, reset, retry) is
// computed with the scripts' arithmetic, so a decision reads the same
// whichever side made it.
//
// State lives in memory, one entry per window of a bucket as the scripts'
// Redis keys, and carries the same expiry as their TTL. All windows of a
// bucket share a shard, as they share a Redis Cluster hash tag, so one lock
// makes checking every window before committing any atomic.
//
// The number of entries is bounded (LocalMaxEntries). When the bound is
// reached and no expired entry can be dropped, a request needing new state is
// answered as if its state were fresh and that state is not kept: tenants
// already tracked stay limited, new ones are admitted (fail open). Evicting a
// live entry instead would forget the usage of a tenant that is being limited
// right now, and refusing would let one client spraying identities lock every
// newcomer out. Len reaching the bound is the signal to raise it.
//
// Local is safe for concurrent use.
type Local struct {
	now func() time.Time
	m   shardedMap[localKey, *localEntry, localShard]
}

// LocalOption configures a Local.
type LocalOption func(*Local)

// LocalMaxEntries bounds the number of keys a Local holds; n < 1 keeps the default.
func LocalMaxEntries(n int) LocalOption {
	return func(l *Local) {
		if n >= 1 {
			l.m.limit = int64(n)
		}
	}
}

// NewLocal returns an empty Local reading the time from now (time.Now when nil).
func NewLocal(now func() time.Time, opts ...LocalOption) *Local {
	if now == nil {
		now = time.Now
	}
	l := &Local{now: now}
	l.m.init(DefaultLocalMaxEntries)
	for _, o := range opts {
		o(l)
	}
	for i := range l.m.shards {
		l.m.shards[i].x.minExpiry = math.MaxInt64
	}
	return l
}

// localShard is what a shard of Local keeps besides its map.
type localShard struct {
	// minExpiry is at most the earliest expiry in the shard's map, so a
	// shard is only scanned for expired entries when one may exist.
	minExpiry int64
}

// localMapShard is one shard of Local's state.
type localMapShard = shard[localKey, *localEntry, localShard]

// localKey identifies the same state as Bucket.Key, without building the
// string on every request.
type localKey struct {
	bucket    Bucket
	period    time.Duration
	algorithm *algorithm
}

// localEntry is one window's state, the scripts' hash or sorted set.
type localEntry struct {
	expires int64 // µs since the epoch: the key's TTL in the scripts
	// TokenBucket: tokens at time last (µs). GCRA: last is the theoretical
	// arrival time (µs).
	tokens float64
	last   int64
	// FixedWindow: window number and its count. SlidingWindowCounter: also
	// the previous window's count.
	win, cur, prev int64
	// SlidingWindowLog: times of the entries in the window.
	log *timeLog
}

// localWindow is what the check phase read of one window, for the reply
// phase to answer from and commit.
type localWindow struct {
	entry *localEntry // nil when there is no state yet
	fresh bool        // entry is nil or expired: read as new state
	// requests, capacity and period (µs) of the window.
	requests, capacity, period int64
	win                        int64            // FixedWindow, SlidingWindowCounter
	count, prev                int64            // count: FixedWindow, SlidingWindowLog, SlidingWindowCounter's current
	tokens, estimate           float64          // TokenBucket, SlidingWindowCounter
	tat, interval, tolerance   int64            // GCRA, in µs
	cal                        *config.Calendar // FixedWindow's calendar window, nil for a period
	reset                      int64            // FixedWindow: the window's end (µs)
}

// Check runs the algorithm for req (already validated) at the local clock and
// returns, per window, the same triple as the scripts (remaining, reset,
// retry) plus allowed. A Cost of 0 reads without committing.
func (l *Local) Check(req *Request) (allowed bool, now time.Time, windows []WindowResult) {
	ts := l.now().UnixMicro()
	alg := descriptorOf(req.Algorithm)
	windows = make([]WindowResult, len(req.Windows))
	var buf [maxWindows]localWindow
	pending := buf[:0]
	sh := l.m.shardAt(maphash.Comparable(l.m.seed, req.Bucket))

	sh.mu.Lock()
	defer sh.mu.Unlock()
	allowed = true
	for _, w := range req.Windows {
		p := localWindow{
			requests: w.Requests,
			capacity: w.capacity(req.Algorithm),
			period:   w.Period.Microseconds(),
			cal:      w.Calendar,
			entry:    sh.m[localKey{req.Bucket, w.windowID(), alg}],
		}
		p.fresh = p.entry == nil || ts >= p.entry.expires
		if !alg.read(&p, ts, req.Cost) {
			allowed = false
		}
		pending = append(pending, p)
	}

	commit := allowed && req.Cost > 0
	if commit {
		l.claim(sh, req, alg, pending, ts)
	}
	for i := range pending {
		p := &pending[i]
		if !commit && p.fresh && p.entry != nil {
			// expired and not renewed: the key is gone in Redis too
			l.m.remove(sh, localKey{req.Bucket, req.Windows[i].windowID(), alg})
			p.entry = nil
		}
		remaining, reset, retry := alg.answer(p, ts, req.Cost, allowed)
		if commit && p.entry != nil {
			sh.x.minExpiry = min(sh.x.minExpiry, p.entry.expires)
		}
		windows[i] = WindowResult{
			Remaining: remaining,
			Reset:     time.UnixMicro(reset),
			Retry:     time.Duration(retry) * time.Microsecond,
		}
	}
	return allowed, time.UnixMicro(ts), windows
}

// Sweep drops state that has expired (the scripts' TTLs); it is called periodically.
func (l *Local) Sweep() {
	now := l.now().UnixMicro()
	for i := range l.m.shards {
		sh := &l.m.shards[i]
		sh.mu.Lock()
		l.sweep(sh, now)
		sh.mu.Unlock()
	}
}

// Len is the number of live keys, for metrics and tests.
func (l *Local) Len() int {
	return int(l.m.len())
}

// sweep drops the expired entries of sh, whose lock is held, and reports
// whether it dropped any.
func (l *Local) sweep(sh *localMapShard, now int64) bool {
	if now < sh.x.minExpiry {
		return false
	}
	next := int64(math.MaxInt64)
	dropped := l.m.removeIf(sh, func(_ localKey, e *localEntry) bool {
		if now >= e.expires {
			return true
		}
		next = min(next, e.expires)
		return false
	})
	sh.x.minExpiry = next
	return dropped > 0
}

// claim gives each window of a committing request an entry to commit into:
// expired entries are renewed first, so that making room for new ones cannot
// drop them. A window may stay without one when Local is full.
func (l *Local) claim(sh *localMapShard, req *Request, alg *algorithm, pending []localWindow, now int64) {
	for i := range pending {
		if p := &pending[i]; p.fresh && p.entry != nil {
			p.entry.reset()
			p.entry.expires = math.MaxInt64 // in use: answer sets the real expiry
		}
	}
	for i := range pending {
		if p := &pending[i]; p.entry == nil {
			p.entry = l.create(sh, localKey{req.Bucket, req.Windows[i].windowID(), alg}, now)
		}
	}
}

// create adds an entry for key to sh, whose lock is held, or returns nil when
// Local is full even after dropping expired entries.
func (l *Local) create(sh *localMapShard, key localKey, now int64) *localEntry {
	if !l.m.reserve() && !(l.dropExpired(sh, now) && l.m.reserve()) {
		return nil
	}
	e := &localEntry{}
	sh.m[key.clone()] = e
	return e
}

// dropExpired sweeps own, whose lock is held, then the other shards until one
// drops something. It only tries their locks, so it never waits on another
// request or deadlocks with one doing the same.
func (l *Local) dropExpired(own *localMapShard, now int64) bool {
	if l.sweep(own, now) {
		return true
	}
	for i := range l.m.shards {
		sh := &l.m.shards[i]
		if sh == own || !sh.mu.TryLock() {
			continue
		}
		dropped := l.sweep(sh, now)
		sh.mu.Unlock()
		if dropped {
			return true
		}
	}
	return false
}

// clone copies the key's strings into one allocation, so a stored key does
// not keep a request's (possibly larger) buffers alive.
func (k localKey) clone() localKey {
	b := k.bucket
	s := b.String()
	i := len(b.Namespace)
	j := i + 1 + len(b.Policy)
	n := j + 1 + len(b.Rule)
	k.bucket = Bucket{Namespace: s[:i], Policy: s[i+1 : j], Rule: s[j+1 : n], Tenant: Tenant(s[n+1:])}
	return k
}

// reset makes an expired entry new state again, keeping its buffers.
func (e *localEntry) reset() {
	log := e.log
	*e = localEntry{log: log}
	if log != nil {
		log.head, log.n = 0, 0
	}
}

// expiryMs is a PEXPIRE of ms milliseconds in µs: at least 1ms, as the scripts.
func expiryMs(ms float64) int64 {
	return int64(max(1, ms)) * 1000
}

// floorDiv is Lua's math.floor(a / b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ceilDiv is Lua's math.ceil(a / b) for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 {
	return (a + b - 1) / b
}
