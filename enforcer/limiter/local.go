package limiter

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// WindowResult is one window's answer to a check.
type WindowResult struct {
	Remaining int64
	Reset     time.Time     // when the window is fully replenished
	Retry     time.Duration // wait until the request's cost fits this window; 0 when it does
}

// DefaultLocalMaxEntries bounds the keys a Local holds when NewLocal is given
// no LocalMaxEntries option.
const DefaultLocalMaxEntries = 100_000

const (
	// localShards spreads keys over independent locks so that tenants do
	// not contend with each other.
	localShards = 32
	// localEps is the scripts' eps: it absorbs float rounding, far below
	// one request.
	localEps = 1e-9
)

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
	now        func() time.Time
	seed       maphash.Seed
	maxEntries int64
	entries    atomic.Int64
	shards     [localShards]localShard
}

// LocalOption configures a Local.
type LocalOption func(*Local)

// LocalMaxEntries bounds the number of keys a Local holds; n < 1 keeps the default.
func LocalMaxEntries(n int) LocalOption {
	return func(l *Local) {
		if n >= 1 {
			l.maxEntries = int64(n)
		}
	}
}

// NewLocal returns an empty Local reading the time from now (time.Now when nil).
func NewLocal(now func() time.Time, opts ...LocalOption) *Local {
	if now == nil {
		now = time.Now
	}
	l := &Local{now: now, seed: maphash.MakeSeed(), maxEntries: DefaultLocalMaxEntries}
	for _, o := range opts {
		o(l)
	}
	for i := range l.shards {
		l.shards[i].m = make(map[localKey]*localEntry)
		l.shards[i].minExpiry = math.MaxInt64
	}
	return l
}

type localShard struct {
	mu sync.Mutex
	m  map[localKey]*localEntry
	// minExpiry is at most the earliest expiry in m, so a shard is only
	// scanned for expired entries when one may exist.
	minExpiry int64
	_         [40]byte // keeps shards on separate cache lines
}

// localKey identifies the same state as Bucket.Key, without building the
// string on every request.
type localKey struct {
	bucket    Bucket
	period    time.Duration
	algorithm localAlgorithm
}

// localAlgorithm is an Algorithm as a number: cheaper to hash in every key.
type localAlgorithm uint8

func keyOf(b Bucket, a Algorithm, period time.Duration) localKey {
	k := localKey{bucket: b, period: period}
	switch a {
	case TokenBucket:
		k.algorithm = 1
	case SlidingWindowLog:
		k.algorithm = 2
	case SlidingWindowCounter:
		k.algorithm = 3
	case FixedWindow:
		k.algorithm = 4
	}
	return k
}

// localEntry is one window's state, the scripts' hash or sorted set.
type localEntry struct {
	expires int64 // µs since the epoch: the key's TTL in the scripts
	// TokenBucket: tokens at time last (µs).
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
	win                        int64   // FixedWindow, SlidingWindowCounter
	count, prev                int64   // count: FixedWindow, SlidingWindowLog, SlidingWindowCounter's current
	tokens, estimate           float64 // TokenBucket, SlidingWindowCounter
}

// Check runs the algorithm for req (already validated) at the local clock and
// returns, per window, the same triple as the scripts (remaining, reset,
// retry) plus allowed. A Cost of 0 reads without committing.
func (l *Local) Check(req *Request) (allowed bool, now time.Time, windows []WindowResult) {
	ts := l.now().UnixMicro()
	windows = make([]WindowResult, len(req.Windows))
	var buf [maxWindows]localWindow
	pending := buf[:0]
	sh := &l.shards[maphash.Comparable(l.seed, req.Bucket)%localShards]

	sh.mu.Lock()
	defer sh.mu.Unlock()
	allowed = true
	for _, w := range req.Windows {
		p := localWindow{
			requests: w.Requests,
			capacity: w.capacity(req.Algorithm),
			period:   w.Period.Microseconds(),
			entry:    sh.m[keyOf(req.Bucket, req.Algorithm, w.Period)],
		}
		p.fresh = p.entry == nil || ts >= p.entry.expires
		if !p.read(req.Algorithm, ts, req.Cost) {
			allowed = false
		}
		pending = append(pending, p)
	}

	commit := allowed && req.Cost > 0
	if commit {
		l.claim(sh, req, pending, ts)
	}
	for i := range pending {
		p := &pending[i]
		if !commit && p.fresh && p.entry != nil {
			// expired and not renewed: the key is gone in Redis too
			delete(sh.m, keyOf(req.Bucket, req.Algorithm, req.Windows[i].Period))
			l.entries.Add(-1)
			p.entry = nil
		}
		remaining, reset, retry := p.answer(req.Algorithm, ts, req.Cost, allowed)
		if commit && p.entry != nil {
			sh.minExpiry = min(sh.minExpiry, p.entry.expires)
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
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		l.sweep(sh, now)
		sh.mu.Unlock()
	}
}

// Len is the number of live keys, for metrics and tests.
func (l *Local) Len() int {
	return int(l.entries.Load())
}

// sweep drops the expired entries of sh, whose lock is held, and reports
// whether it dropped any.
func (l *Local) sweep(sh *localShard, now int64) bool {
	if now < sh.minExpiry {
		return false
	}
	next, dropped := int64(math.MaxInt64), int64(0)
	for k, e := range sh.m {
		if now >= e.expires {
			delete(sh.m, k)
			dropped++
		} else {
			next = min(next, e.expires)
		}
	}
	sh.minExpiry = next
	l.entries.Add(-dropped)
	return dropped > 0
}

// claim gives each window of a committing request an entry to commit into:
// expired entries are renewed first, so that making room for new ones cannot
// drop them. A window may stay without one when Local is full.
func (l *Local) claim(sh *localShard, req *Request, pending []localWindow, now int64) {
	for i := range pending {
		if p := &pending[i]; p.fresh && p.entry != nil {
			p.entry.reset()
			p.entry.expires = math.MaxInt64 // in use: answer sets the real expiry
		}
	}
	for i := range pending {
		if p := &pending[i]; p.entry == nil {
			p.entry = l.create(sh, keyOf(req.Bucket, req.Algorithm, req.Windows[i].Period), now)
		}
	}
}

// create adds an entry for key to sh, whose lock is held, or returns nil when
// Local is full even after dropping expired entries.
func (l *Local) create(sh *localShard, key localKey, now int64) *localEntry {
	if !l.reserve() && !(l.dropExpired(sh, now) && l.reserve()) {
		return nil
	}
	e := &localEntry{}
	sh.m[key.clone()] = e
	return e
}

// reserve counts one more entry unless Local is full.
func (l *Local) reserve() bool {
	if l.entries.Add(1) > l.maxEntries {
		l.entries.Add(-1)
		return false
	}
	return true
}

// dropExpired sweeps own, whose lock is held, then the other shards until one
// drops something. It only tries their locks, so it never waits on another
// request or deadlocks with one doing the same.
func (l *Local) dropExpired(own *localShard, now int64) bool {
	if l.sweep(own, now) {
		return true
	}
	for i := range l.shards {
		sh := &l.shards[i]
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

// read is the check phase of one window, as the scripts' first loop: it
// reads the state at now and reports whether cost fits.
func (p *localWindow) read(a Algorithm, now, cost int64) bool {
	e := p.entry
	switch a {
	case TokenBucket:
		p.tokens = float64(p.capacity)
		if !p.fresh {
			elapsed := max(0, now-e.last)
			// multiply before dividing, as the script: exact for whole token counts
			p.tokens = min(float64(p.capacity), e.tokens+float64(elapsed)*float64(p.requests)/float64(p.period))
		}
		return p.tokens+localEps >= float64(cost)
	case FixedWindow:
		p.win = floorDiv(now, p.period)
		if !p.fresh && e.win == p.win {
			p.count = e.cur
		}
		return p.count+cost <= p.requests
	case SlidingWindowCounter:
		p.win = floorDiv(now, p.period)
		if !p.fresh {
			if e.win == p.win {
				p.count, p.prev = e.cur, e.prev
			} else if e.win == p.win-1 {
				p.prev = e.cur
			}
		}
		start := p.win * p.period
		p.estimate = float64(p.prev)*float64(p.period-(now-start))/float64(p.period) + float64(p.count)
		return p.estimate+float64(cost) <= float64(p.requests)+localEps
	case SlidingWindowLog:
		if !p.fresh {
			// the window is (now - period, now]: an entry leaves at its time + period
			e.log.trim(now - p.period)
			p.count = int64(e.log.n)
		}
		return p.count+cost <= p.requests
	}
	return false
}

// answer is the reply phase of one window, as the scripts' second loop: it
// commits cost when allowed (into p.entry unless Local is full) and returns
// remaining, reset (µs) and retry (µs).
func (p *localWindow) answer(a Algorithm, now, cost int64, allowed bool) (remaining, reset, retry int64) {
	switch a {
	case TokenBucket:
		return p.answerTokenBucket(now, cost, allowed)
	case FixedWindow:
		return p.answerFixedWindow(now, cost, allowed)
	case SlidingWindowCounter:
		return p.answerSlidingWindowCounter(now, cost, allowed)
	case SlidingWindowLog:
		return p.answerSlidingWindowLog(now, cost, allowed)
	}
	return 0, now, 0
}

func (p *localWindow) answerTokenBucket(now, cost int64, allowed bool) (remaining, reset, retry int64) {
	tok, fcost := p.tokens, float64(cost)
	capacity, period, requests := float64(p.capacity), float64(p.period), float64(p.requests)
	if allowed {
		if cost > 0 {
			tok -= fcost
			if e := p.entry; e != nil {
				e.tokens, e.last = tok, now
				// once full again the bucket equals a fresh one: let it expire then
				e.expires = now + expiryMs(math.Ceil((capacity-tok)*period/requests/1000))
			}
		}
	} else if tok+localEps < fcost {
		retry = int64(math.Ceil((fcost - tok) * period / requests))
	}
	reset = now + int64(math.Ceil(max(0, capacity-tok-localEps)*period/requests))
	return int64(math.Floor(tok + localEps)), reset, retry
}

func (p *localWindow) answerFixedWindow(now, cost int64, allowed bool) (remaining, reset, retry int64) {
	count := p.count
	reset = (p.win + 1) * p.period
	if allowed {
		if cost > 0 {
			count += cost
			if e := p.entry; e != nil {
				e.win, e.cur = p.win, count
				e.expires = now + expiryMs(float64(ceilDiv(reset-now, 1000)))
			}
		}
	} else if count+cost > p.requests {
		retry = reset - now
	}
	if count == 0 {
		reset = now
	}
	return max(0, p.requests-count), reset, retry
}

func (p *localWindow) answerSlidingWindowCounter(now, cost int64, allowed bool) (remaining, reset, retry int64) {
	period, cur, prev, estimate := p.period, p.count, p.prev, p.estimate
	start := p.win * period
	if allowed {
		if cost > 0 {
			cur += cost
			estimate += float64(cost)
			if e := p.entry; e != nil {
				e.win, e.cur, e.prev = p.win, cur, prev
				// the current count still weighs until the end of the next window
				e.expires = now + expiryMs(float64(ceilDiv(start+2*period-now, 1000)))
			}
		}
	} else if estimate+float64(cost) > float64(p.requests)+localEps {
		free := p.requests - cost
		var at int64
		if cur <= free {
			// this window: wait until prev's weight w satisfies prev*w <= free - cur
			// (prev > 0 here, or the estimate would be cur and cost would fit)
			at = start + int64(math.Ceil(float64(period)*(1-float64(free-cur)/float64(prev))))
		} else {
			// next window, where the current count becomes the weighted one
			at = start + period + int64(math.Ceil(float64(period)*max(0, 1-float64(free)/float64(cur))))
		}
		retry = max(0, at-now)
	}
	reset = now
	if cur > 0 {
		reset = start + 2*period
	} else if prev > 0 {
		reset = start + period
	}
	remaining = max(0, int64(math.Floor(float64(p.requests)-estimate+localEps)))
	return remaining, reset, retry
}

func (p *localWindow) answerSlidingWindowLog(now, cost int64, allowed bool) (remaining, reset, retry int64) {
	count, e := p.count, p.entry
	reset = now
	if allowed && cost > 0 {
		count += cost
		reset = now + p.period
		if e != nil {
			if e.log == nil {
				e.log = &timeLog{}
			}
			e.log.push(now, int(cost))
			reset = e.log.newest() + p.period
			e.expires = reset
		}
	} else if count > 0 {
		if !allowed && count+cost > p.requests {
			// the (count + cost - requests)-th oldest entry must leave first
			k := count + cost - p.requests
			retry = max(0, e.log.at(int(k-1))+p.period-now)
		}
		reset = e.log.newest() + p.period
	}
	return max(0, p.requests-count), reset, retry
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

// timeLog is a ring buffer of the times (µs) of a sliding log's entries,
// oldest first; its length is a power of two.
type timeLog struct {
	buf     []int64
	head, n int
}

// minTimeLog is the smallest buffer; shrinking stops there.
const minTimeLog = 8

func (r *timeLog) at(i int) int64 {
	return r.buf[(r.head+i)&(len(r.buf)-1)]
}

func (r *timeLog) newest() int64 {
	return r.at(r.n - 1)
}

// trim drops the entries at or before cutoff, and halves the buffer when it
// is mostly empty so a past burst does not pin memory.
func (r *timeLog) trim(cutoff int64) {
	for r.n > 0 && r.buf[r.head] <= cutoff {
		r.head = (r.head + 1) & (len(r.buf) - 1)
		r.n--
	}
	if len(r.buf) > minTimeLog && r.n <= len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
}

// push records count entries at t. Times stay sorted: if the clock stepped
// back, the entries are recorded at the newest time instead.
func (r *timeLog) push(t int64, count int) {
	if r.n > 0 {
		t = max(t, r.newest())
	}
	if need := r.n + count; need > len(r.buf) {
		size := max(minTimeLog, len(r.buf))
		for size < need {
			size *= 2
		}
		r.resize(size)
	}
	mask := len(r.buf) - 1
	for i := range count {
		r.buf[(r.head+r.n+i)&mask] = t
	}
	r.n += count
}

func (r *timeLog) resize(size int) {
	buf := make([]int64, size)
	for i := range r.n {
		buf[i] = r.at(i)
	}
	r.buf, r.head = buf, 0
}
