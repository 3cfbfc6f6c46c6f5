package limiter

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// shardCount is how many shards a shardedMap spreads its keys over, so
// that buckets do not contend for one lock.
const shardCount = 32

// shardedMap is the machinery of the limiter's in-process tables (the
// decision cache, the lease table, Local's state): a map split over
// shards, each under its own lock and chosen by a seeded hash, with one
// bound on the entries of all shards together. X is what a table keeps
// per shard besides its map (a list, a low-water mark), guarded by the
// same lock.
//
// Past the bound a table keeps nothing new: what it would hold is asked
// of Redis, or answered as fresh state, which is why a full table stays
// exact.
type shardedMap[K comparable, V, X any] struct {
	seed    maphash.Seed
	limit   int64
	entries atomic.Int64
	shards  [shardCount]shard[K, V, X]
}

// shard is one lock's part of a shardedMap.
type shard[K comparable, V, X any] struct {
	mu sync.Mutex
	m  map[K]V
	x  X
	_  [64]byte // keeps shards' locks on separate cache lines
}

// init makes m empty, holding at most limit entries.
func (m *shardedMap[K, V, X]) init(limit int64) {
	m.seed, m.limit = maphash.MakeSeed(), limit
	for i := range m.shards {
		m.shards[i].m = make(map[K]V)
	}
}

// shardOf is the shard of key k.
func (m *shardedMap[K, V, X]) shardOf(k K) *shard[K, V, X] {
	return &m.shards[maphash.Comparable(m.seed, k)%shardCount]
}

// shardAt is the shard of hash h, for a table placing keys by part of
// them (Local keeps every window of a bucket in the bucket's shard).
func (m *shardedMap[K, V, X]) shardAt(h uint64) *shard[K, V, X] {
	return &m.shards[h%shardCount]
}

// len is the number of entries of every shard.
func (m *shardedMap[K, V, X]) len() int64 { return m.entries.Load() }

// reserve counts one more entry, which the caller then adds to its shard,
// unless m is full.
func (m *shardedMap[K, V, X]) reserve() bool {
	if m.entries.Add(1) > m.limit {
		m.entries.Add(-1)
		return false
	}
	return true
}

// remove drops k from sh, whose lock is held, if it is there.
func (m *shardedMap[K, V, X]) remove(sh *shard[K, V, X], k K) {
	if _, ok := sh.m[k]; ok {
		delete(sh.m, k)
		m.entries.Add(-1)
	}
}

// removeIf drops the entries of sh, whose lock is held, that drop reports,
// and returns how many it dropped.
func (m *shardedMap[K, V, X]) removeIf(sh *shard[K, V, X], drop func(K, V) bool) int64 {
	var n int64
	for k, v := range sh.m {
		if drop(k, v) {
			delete(sh.m, k)
			n++
		}
	}
	m.entries.Add(-n)
	return n
}

// sweep drops the entries of every shard that drop reports, one shard's
// lock at a time.
func (m *shardedMap[K, V, X]) sweep(drop func(K, V) bool) {
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		m.removeIf(sh, drop)
		sh.mu.Unlock()
	}
}
