package limiter

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// What the lease table holds per tenant seen, for the bound
// docs/performance.md states: a tenant that asks Redis per request (too
// rare to lease) is tracked for leaseIdle, and costs its entry, its map
// slot and its hashed identity.
func TestLeaseTableBytesPerTenant(t *testing.T) {
	const tenants = 20_000
	c := &fakeClock{base: time.Now()}
	l := newLeases(c, newDecisionCache(c))
	b := Bucket{Namespace: "shop", Policy: "api", Rule: "all"}
	rule, err := newRule(b, TokenBucket, []Window{{Requests: 100, Period: time.Second}}, 1,
		FailurePolicy{Mode: config.FailOpen, Timeout: time.Second}, withLeasing(config.LeasingAuto))
	if err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for i := range tenants {
		req := rule.Request(HashTenant("salt", fmt.Sprint("tenant-", i)))
		if a := l.answer(&req, true, false); !a.owner {
			t.Fatalf("tenant %d: a new bucket's first request is not sent to Redis: %+v", i, a)
		}
	}
	per := float64(heap()-before) / tenants
	runtime.KeepAlive(l)
	t.Logf("lease table: %.0f bytes per tenant", per)
	// An entry is 192 bytes until its bucket leases (742 bytes per tenant
	// when every entry carried its request and last decision).
	if per > 400 {
		t.Errorf("lease table holds %.0f bytes per tenant seen, want at most 400", per)
	}
	if got := l.m.len(); got != tenants {
		t.Errorf("%d entries, want %d", got, tenants)
	}
}
