package e2e

import (
	"net/http"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/stack"
)

const awayPolicy = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: away}
spec:
  selector: {matchLabels: {app: away}}
  upstreamPort: 8080
  timeout: 1s
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: api
      algorithm: SlidingWindowLog
      limits: [{requests: 5, period: 1m}]
`

var _ = Describe("Delivery while the manager is away", Ordered, func() {
	const ns = "e2e-delivery"
	var eps []stack.Endpoint
	BeforeAll(func(ctx SpecContext) {
		eps = deploy(ctx, ns, awayPolicy, "away", 8080, 2)
		expectReady(ctx, ns, "away", 2)
		DeferCleanup(func(ctx SpecContext) {
			if !sluice.Manager.Running() {
				Expect(sluice.Manager.Start(ctx)).To(Succeed())
			}
		})
	})

	limitOn := func(ep stack.Endpoint) string {
		return request(ep, http.MethodGet, "/", "X-Tenant-ID", "probe-"+time.Now().Format("150405.000000")).header.Get("X-Ratelimit-Limit")
	}

	It("keeps the enforcers enforcing, and pushes the edit made meanwhile once it is back", func(ctx SpecContext) {
		// The kubelet is slow to refresh the volume: only a push brings the edit.
		for _, ep := range eps {
			sluice.Kubelet.HoldConfigMaps(ns, ep.Pod)
			DeferCleanup(sluice.Kubelet.ReleaseConfigMaps, ns, ep.Pod)
		}
		sluice.Manager.Stop()
		editPolicy(ctx, ns, "away", func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Rules[0].Limits[0].Requests = 9
		})
		Consistently(func(g Gomega) {
			for _, ep := range eps {
				g.Expect(limitOn(ep)).To(Equal("5"))
			}
		}).WithTimeout(2 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		replies := spread(eps, 7, http.MethodGet, "/", "X-Tenant-ID", "while-away")
		Expect(codes(replies)).To(Equal(map[int]int{http.StatusOK: 5, http.StatusTooManyRequests: 2}), "the last good configuration enforces")

		Expect(sluice.Manager.Start(ctx)).To(Succeed())
		for _, ep := range eps {
			Eventually(limitOn).WithArguments(ep).WithTimeout(20*time.Second).Should(Equal("9"), "the edit pushed to %s", ep.Pod)
		}
		expectReady(ctx, ns, "away", 2)
	})

	It("starts an enforcer that restarts while the manager is away with the namespace's configuration", func(ctx SpecContext) {
		for _, ep := range eps {
			sluice.Kubelet.ReleaseConfigMaps(ns, ep.Pod)
		}
		expectConfigLoaded(ctx, ns, eps)
		sluice.Manager.Stop()
		before := enforcerPids(ns)[eps[0].Pod]
		Expect(syscall.Kill(before, syscall.SIGKILL)).To(Succeed())
		Eventually(func() int { return enforcerPids(ns)[eps[0].Pod] }).WithTimeout(20 * time.Second).ShouldNot(Or(Equal(before), BeZero()))
		Eventually(limitOn).WithArguments(eps[0]).WithTimeout(20*time.Second).Should(Equal("9"), "the restarted enforcer reads its file")
		replies := spread(eps[:1], 11, http.MethodGet, "/", "X-Tenant-ID", "after-restart")
		Expect(codes(replies)).To(Equal(map[int]int{http.StatusOK: 9, http.StatusTooManyRequests: 2}))
	})
})
