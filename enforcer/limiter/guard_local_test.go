package limiter

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// TestGuardLocalFallbackIsBounded: the bound given to NewGuard (the
// enforcer's --local-fallback-max-entries) holds the LocalFallback state,
// and LocalEntries (the sluice_enforcer_local_fallback_entries gauge)
// reports its size.
func TestGuardLocalFallbackIsBounded(t *testing.T) {
	g := NewWithT(t)
	server := redistest.Start(t)
	guard := NewGuard(newRedis(t, server.URL()), LocalMaxEntries(2))
	t.Cleanup(guard.Close)
	g.Expect(guard.LocalEntries()).To(BeZero())

	server.Stop()
	for _, tenant := range []string{"a", "b", "c", "d"} {
		req := requestWith(t, config.FailLocal)
		req.Bucket.Tenant = HashTenant("salt", tenant)
		d, err := guard.Allow(context.Background(), req)
		g.Expect(err).To(HaveOccurred(), "Redis is down: the local fallback decides")
		g.Expect(d.Allowed).To(BeTrue())
	}
	g.Expect(guard.LocalEntries()).To(Equal(2), "four tenants, a bound of two")
}
