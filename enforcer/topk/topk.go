// Package topk finds the heaviest keys of a stream in fixed memory: the
// Space-Saving sketch (Metwally, Agrawal and El Abbadi, 2005). A sketch of
// capacity k holds at most k keys whatever the number of distinct keys it
// sees; every key whose true count exceeds total/k is in it, and each
// count it reports is at most Error above the true count.
//
// It imports no package of this module.
package topk

import (
	"container/heap"
	"slices"
	"strings"
)

// Item is one key and its estimated count. Error bounds the
// overestimate: the true count is between Count-Error and Count.
type Item struct {
	Key   string `json:"key"`
	Count int64  `json:"count"`
	Error int64  `json:"error,omitempty"`
}

// Sketch is a Space-Saving sketch. It is not safe for concurrent use.
type Sketch struct {
	capacity int
	index    map[string]int // key → position in items
	items    minHeap
}

// New is a sketch that holds at most capacity keys (at least 1).
func New(capacity int) *Sketch {
	capacity = max(capacity, 1)
	s := &Sketch{capacity: capacity, index: make(map[string]int, capacity)}
	s.items.index = s.index
	return s
}

// Add counts n (at least 1) more for key. A new key, when the sketch is
// full, takes the place of the key with the smallest count, and inherits
// that count as its error.
func (s *Sketch) Add(key string, n int64) {
	n = max(n, 1)
	if i, ok := s.index[key]; ok {
		s.items.entries[i].Count += n
		heap.Fix(&s.items, i)
		return
	}
	if len(s.items.entries) < s.capacity {
		heap.Push(&s.items, Item{Key: key, Count: n})
		return
	}
	least := &s.items.entries[0]
	delete(s.index, least.Key)
	*least = Item{Key: key, Count: least.Count + n, Error: least.Count}
	s.index[key] = 0
	heap.Fix(&s.items, 0)
}

// Len is how many keys the sketch holds.
func (s *Sketch) Len() int { return len(s.items.entries) }

// Top are the n keys with the largest counts, largest first (ties by key).
func (s *Sketch) Top(n int) []Item {
	out := slices.Clone(s.items.entries)
	slices.SortFunc(out, func(a, b Item) int {
		if a.Count != b.Count {
			if a.Count > b.Count {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// Reset forgets every key.
func (s *Sketch) Reset() {
	clear(s.index)
	s.items.entries = s.items.entries[:0]
}

// Merge adds the items of several sketches' Top lists (of several
// enforcers) key by key, and keeps the n largest.
func Merge(n int, lists ...[]Item) []Item {
	sum := map[string]Item{}
	for _, l := range lists {
		for _, it := range l {
			m := sum[it.Key]
			m.Key, m.Count, m.Error = it.Key, m.Count+it.Count, m.Error+it.Error
			sum[it.Key] = m
		}
	}
	s := New(len(sum))
	for _, it := range sum {
		s.items.entries = append(s.items.entries, it)
	}
	return s.Top(n)
}

// minHeap orders items by count, smallest first, and keeps index current.
type minHeap struct {
	entries []Item
	index   map[string]int
}

func (h *minHeap) Len() int           { return len(h.entries) }
func (h *minHeap) Less(i, j int) bool { return h.entries[i].Count < h.entries[j].Count }
func (h *minHeap) Swap(i, j int) {
	h.entries[i], h.entries[j] = h.entries[j], h.entries[i]
	h.index[h.entries[i].Key], h.index[h.entries[j].Key] = i, j
}
func (h *minHeap) Push(x any) {
	it := x.(Item)
	h.index[it.Key] = len(h.entries)
	h.entries = append(h.entries, it)
}
func (h *minHeap) Pop() any {
	last := h.entries[len(h.entries)-1]
	h.entries = h.entries[:len(h.entries)-1]
	delete(h.index, last.Key)
	return last
}
