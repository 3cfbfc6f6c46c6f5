package metrics

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// BenchmarkTopTenantsOneHotRule is what each decision of one rule pays its
// top-tenant sketches, every decision on one mutex: alone, and from as
// many goroutines as GOMAXPROCS allows, for a few tenants and for many.
func BenchmarkTopTenantsOneHotRule(b *testing.B) {
	p := &rules.Policy{Name: "api"}
	r := &rules.Rule{Rule: &config.Rule{Name: "all"}}
	for _, tenants := range []int{10, 100_000} {
		names := make([]string, tenants)
		for i := range names {
			names[i] = "tenant-" + strconv.Itoa(i)
		}
		b.Run("tenants="+strconv.Itoa(tenants)+"/serial", func(b *testing.B) {
			top := NewTopTenants()
			i := 0
			for b.Loop() {
				top.Tenant(p, r, names[i%tenants], engine.Allowed)
				i++
			}
		})
		b.Run("tenants="+strconv.Itoa(tenants)+"/parallel", func(b *testing.B) {
			top := NewTopTenants()
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					top.Tenant(p, r, names[int(next.Add(1))%tenants], engine.Allowed)
				}
			})
		})
	}
}
