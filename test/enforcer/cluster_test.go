package enforcer

import (
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
)

// TestTwoEnforcersShareOneLimit: two enforcer processes (two replicas of a
// pod) deciding with one Redis admit exactly the limit between them.
func TestTwoEnforcersShareOneLimit(t *testing.T) {
	g := NewWithT(t)
	spec := policy("global", `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: api
      algorithm: SlidingWindowLog
      limits: [{requests: 25, period: 1h}]`)
	a, b := start(t, setup{policies: spec}), start(t, setup{policies: spec})
	var allowed, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			target := a.url
			if i%2 == 1 {
				target = b.url
			}
			for range 10 {
				switch r := get(t, target, "X-Tenant-ID: acme"); r.status {
				case 200:
					allowed.Add(1)
				case 429:
					refused.Add(1)
				default:
					t.Errorf("status %d: %s", r.status, r.body)
				}
			}
		})
	}
	wg.Wait()
	g.Expect(allowed.Load()).To(Equal(int64(25)))
	g.Expect(refused.Load()).To(Equal(int64(55)))
}
