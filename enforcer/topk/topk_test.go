package topk

import (
	"fmt"
	"runtime"
	"testing"
)

func TestHeavyTenantsAreFoundAmongManyLightOnes(t *testing.T) {
	s := New(128)
	// 100,000 tenants of one request each, and three heavy ones spread
	// through the stream, each above total/capacity (824): the sketch
	// guarantees those.
	for i := range 100_000 {
		s.Add(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255), 1)
		if i%100 == 0 {
			s.Add("heavy-a", 3)
			s.Add("heavy-b", 2)
		}
		if i%100 == 50 {
			s.Add("heavy-c", 1)
		}
	}
	if s.Len() > 128 {
		t.Fatalf("the sketch holds %d keys, more than its capacity 128", s.Len())
	}
	top := s.Top(3)
	want := []string{"heavy-a", "heavy-b", "heavy-c"}
	for i, it := range top {
		if it.Key != want[i] {
			t.Fatalf("top %d is %+v, want %s (top: %+v)", i, it, want[i], top)
		}
		if it.Count-it.Error > trueCount(it.Key) || it.Count < trueCount(it.Key) {
			t.Fatalf("%s: count %d error %d does not bound the true count %d", it.Key, it.Count, it.Error, trueCount(it.Key))
		}
	}
}

func trueCount(key string) int64 {
	return map[string]int64{"heavy-a": 3000, "heavy-b": 2000, "heavy-c": 1000}[key]
}

func TestMergeAddsEnforcersCounts(t *testing.T) {
	a, b := New(4), New(4)
	a.Add("x", 5)
	a.Add("y", 1)
	b.Add("y", 7)
	b.Add("z", 2)
	got := Merge(2, a.Top(-1), b.Top(-1))
	if len(got) != 2 || got[0] != (Item{Key: "y", Count: 8}) || got[1] != (Item{Key: "x", Count: 5}) {
		t.Fatalf("merged %+v", got)
	}
}

// TestMemoryIsBoundedWhateverTheTenants measures what a sketch of 32 keys
// retains after 1,000 and after 100,000 distinct tenants: the same, within
// a few KiB (docs/kubectl-plugin.md gives the figure).
func TestMemoryIsBoundedWhateverTheTenants(t *testing.T) {
	retained := func(tenants int) (uint64, *Sketch) {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := New(32)
		for i := range tenants {
			s.Add(fmt.Sprintf("sha256:%064x", i), int64(1+i%7))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		return after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc), s
	}
	small, s1 := retained(1_000)
	large, s2 := retained(100_000)
	t.Logf("a sketch of 32 keys retains %d bytes after 1,000 tenants, %d bytes after 100,000", small, large)
	if s1.Len() != 32 || s2.Len() != 32 {
		t.Fatalf("sketches hold %d and %d keys, want 32", s1.Len(), s2.Len())
	}
	if large > 64<<10 {
		t.Fatalf("a sketch of 32 keys retains %d bytes after 100,000 tenants: its memory grows with the tenants", large)
	}
}
