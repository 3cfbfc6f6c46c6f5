package e2e

import (
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/stack"
)

const apiOutagePolicy = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: standalone}
spec:
  selector: {matchLabels: {app: standalone}}
  upstreamPort: 8080
  timeout: 1s
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: api
      algorithm: SlidingWindowLog
      limits: [{requests: 5, period: 1m}]
`

var _ = Describe("An API server outage", Ordered, func() {
	const ns = "e2e-apiserver"
	var eps []stack.Endpoint
	BeforeAll(func(ctx SpecContext) {
		eps = deploy(ctx, ns, apiOutagePolicy, "standalone", 8080, 2)
		expectReady(ctx, ns, "standalone", 2)
	})

	It("leaves the enforcers enforcing their last configuration", func(ctx SpecContext) {
		pids := enforcerPids(ns)
		Expect(sluice.StopAPIServer()).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = sluice.StartAPIServer(ctx) })

		replies := spread(eps, 8, http.MethodGet, "/", "X-Tenant-ID", "during-outage")
		Expect(codes(replies)).To(Equal(map[int]int{http.StatusOK: 5, http.StatusTooManyRequests: 3}))
		// The manager and the kubelet keep failing to reach the API
		// meanwhile; nothing they do must disturb the enforcers.
		time.Sleep(3 * time.Second)
		replies = spread(eps, 8, http.MethodGet, "/", "X-Tenant-ID", "later-in-outage")
		Expect(codes(replies)).To(Equal(map[int]int{http.StatusOK: 5, http.StatusTooManyRequests: 3}))
		Expect(enforcerPids(ns)).To(Equal(pids))

		Expect(sluice.StartAPIServer(ctx)).To(Succeed())
		expectReady(ctx, ns, "standalone", 2)
	})

	It("then takes edits again", func(ctx SpecContext) {
		editPolicy(ctx, ns, "standalone", func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Rules[0].Limits[0].Requests = 7
		})
		expectReady(ctx, ns, "standalone", 2)
		replies := spread(eps, 10, http.MethodGet, "/", "X-Tenant-ID", "after-outage")
		Expect(codes(replies)).To(Equal(map[int]int{http.StatusOK: 7, http.StatusTooManyRequests: 3}))
	})
})
