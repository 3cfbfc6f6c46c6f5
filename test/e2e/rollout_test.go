package e2e

import (
	"net/http"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/stack"
)

const editedPolicy = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: edited}
spec:
  selector: {matchLabels: {app: edited}}
  upstreamPort: 8080
  timeout: 1s
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: api
      algorithm: SlidingWindowLog
      limits: [{requests: 5, period: 1m}]
`

var _ = Describe("Editing a policy", Ordered, func() {
	const ns = "e2e-edit"
	var eps []stack.Endpoint
	BeforeAll(func(ctx SpecContext) {
		eps = deploy(ctx, ns, editedPolicy, "edited", 8080, 2)
		expectReady(ctx, ns, "edited", 2)
	})

	limitOn := func(ep stack.Endpoint) string {
		return request(ep, http.MethodGet, "/", "X-Tenant-ID", "probe-"+time.Now().Format("150405.000000")).header.Get("X-Ratelimit-Limit")
	}

	It("reaches every running enforcer by push while the kubelet holds their volume, and Ready follows", func(ctx SpecContext) {
		pids := enforcerPids(ns)
		// Both pods' kubelet is slow to refresh their ConfigMap volume.
		for _, ep := range eps {
			sluice.Kubelet.HoldConfigMaps(ns, ep.Pod)
			DeferCleanup(sluice.Kubelet.ReleaseConfigMaps, ns, ep.Pod)
		}
		editPolicy(ctx, ns, "edited", func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Rules[0].Limits[0].Requests = 8
		})

		for _, ep := range eps {
			Eventually(limitOn).WithArguments(ep).WithTimeout(5*time.Second).Should(Equal("8"), "the edit pushed to %s", ep.Pod)
		}
		expectReady(ctx, ns, "edited", 2)
		Expect(enforcerPids(ns)).To(Equal(pids), "the enforcers reloaded without a restart")

		// The volume refreshed at last brings the same revision: nothing changes.
		for _, ep := range eps {
			sluice.Kubelet.ReleaseConfigMaps(ns, ep.Pod)
		}
		Consistently(func(g Gomega) {
			for _, ep := range eps {
				g.Expect(limitOn(ep)).To(Equal("8"))
			}
		}).WithTimeout(time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		replies := spread(eps, 12, http.MethodGet, "/", "X-Tenant-ID", "after-edit")
		Expect(codes(replies)).To(Equal(map[int]int{http.StatusOK: 8, http.StatusTooManyRequests: 4}))
		Expect(slices.Compact(limitHeaders(replies))).To(Equal([]string{"8"}))
	})
})
