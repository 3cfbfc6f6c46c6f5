package e2e

import (
	"net/http"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

	It("reaches the running enforcers, and Ready is False until all of them run it", func(ctx SpecContext) {
		pids := enforcerPids(ns)
		// The second pod's kubelet is slow to refresh its ConfigMap volume.
		sluice.Kubelet.HoldConfigMaps(ns, eps[1].Pod)
		DeferCleanup(sluice.Kubelet.ReleaseConfigMaps, ns, eps[1].Pod)
		editPolicy(ctx, ns, "edited", func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Rules[0].Limits[0].Requests = 8
		})

		Eventually(limitOn).WithArguments(eps[0]).Should(Equal("8"))
		Eventually(func(g Gomega) {
			p := policy(ctx, ns, "edited")
			g.Expect(readyOf(p)).To(And(
				HaveField("Status", metav1.ConditionFalse),
				HaveField("Reason", v1alpha1.ReasonEnforcersStale),
				HaveField("ObservedGeneration", p.Generation)))
			g.Expect(p.Status.Enforcers.UpToDate).To(BeEquivalentTo(1))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(limitOn(eps[1])).To(Equal("5"), "the held pod keeps its configuration")
			g.Expect(readyOf(policy(ctx, ns, "edited")).Status).To(Equal(metav1.ConditionFalse))
		}).WithTimeout(2 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		sluice.Kubelet.ReleaseConfigMaps(ns, eps[1].Pod)
		Eventually(limitOn).WithArguments(eps[1]).Should(Equal("8"))
		expectReady(ctx, ns, "edited", 2)
		Expect(enforcerPids(ns)).To(Equal(pids), "the enforcers reloaded without a restart")

		replies := spread(eps, 12, http.MethodGet, "/", "X-Tenant-ID", "after-edit")
		Expect(codes(replies)).To(Equal(map[int]int{http.StatusOK: 8, http.StatusTooManyRequests: 4}))
		Expect(slices.Compact(limitHeaders(replies))).To(Equal([]string{"8"}))
	})
})
