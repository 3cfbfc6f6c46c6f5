package e2e

import (
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/stack"
)

// Three policies on the same pods, one per failure mode, each on its path.
const outagePolicies = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: open}
spec:
  selector: {matchLabels: {app: outage}}
  upstreamPort: 8080
  timeout: 1s
  failureMode: Open
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - {name: open, match: {paths: [{prefix: /open}]}, algorithm: SlidingWindowLog, limits: [{requests: 5, period: 1m}]}
---
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: closed}
spec:
  selector: {matchLabels: {app: outage}}
  upstreamPort: 8080
  timeout: 1s
  failureMode: Closed
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - {name: closed, match: {paths: [{prefix: /closed}]}, algorithm: SlidingWindowLog, limits: [{requests: 5, period: 1m}]}
---
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: fallback}
spec:
  selector: {matchLabels: {app: outage}}
  upstreamPort: 8080
  timeout: 1s
  failureMode: LocalFallback
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - {name: fallback, match: {paths: [{prefix: /fallback}]}, algorithm: SlidingWindowLog, limits: [{requests: 10, period: 1m}]}
`

var _ = Describe("Redis outage", Ordered, func() {
	const ns = "e2e-redis"
	var eps []stack.Endpoint
	var pids map[string]int
	BeforeAll(func(ctx SpecContext) {
		eps = deploy(ctx, ns, outagePolicies, "outage", 8080, 2)
		for _, name := range []string{"open", "closed", "fallback"} {
			expectReady(ctx, ns, name, 2)
		}
		pids = enforcerPids(ns)
		sluice.Redis.Stop()
		// Whatever happens below, the next specs get Redis back.
		DeferCleanup(func() { _ = sluice.Redis.Restart() })
	})

	It("lets a fail-open policy's traffic through, and its status says it is degraded", func(ctx SpecContext) {
		before := served(eps)
		replies := spread(eps, 20, http.MethodGet, "/open", "X-Tenant-ID", "tenant-open")
		Expect(codes(replies)).To(Equal(map[int]int{http.StatusOK: 20}))
		Expect(served(eps) - before).To(BeEquivalentTo(20))
		Eventually(func(g Gomega) {
			p := policy(ctx, ns, "open")
			g.Expect(readyOf(p)).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1alpha1.ReasonDegraded)))
			g.Expect(readyOf(p).Message).To(ContainSubstring("failing open"))
			g.Expect(p.Status.Enforcers.Degraded).To(BeEquivalentTo(2))
		}).Should(Succeed())
	})

	It("answers 503 for a fail-closed policy, and nothing reaches the application", func(ctx SpecContext) {
		before := served(eps)
		replies := spread(eps, 10, http.MethodPost, "/closed", "X-Tenant-ID", "tenant-closed")
		Expect(codes(replies)).To(Equal(map[int]int{http.StatusServiceUnavailable: 10}))
		Expect(replies[0].header.Get("Retry-After")).NotTo(BeEmpty())
		Expect(replies[0].header.Get("Content-Type")).To(HavePrefix("application/problem+json"))
		Expect(served(eps)).To(Equal(before))
		Eventually(func(g Gomega) {
			g.Expect(readyOf(policy(ctx, ns, "closed")).Message).To(ContainSubstring("failing closed"))
		}).Should(Succeed())
	})

	It("keeps limiting a LocalFallback policy on each replica, at its share of the limit", func() {
		for _, ep := range eps {
			replies := spread([]stack.Endpoint{ep}, 12, http.MethodGet, "/fallback", "X-Tenant-ID", "tenant-fallback")
			Expect(codes(replies)).To(Equal(map[int]int{http.StatusOK: 5, http.StatusTooManyRequests: 7}),
				"10 requests a minute over 2 replicas: 5 on %s", ep.Pod)
		}
	})

	It("is back to normal when Redis is, without restarting an enforcer and with exact counts", func(ctx SpecContext) {
		Expect(sluice.Redis.Restart()).To(Succeed())
		for _, name := range []string{"open", "closed", "fallback"} {
			expectReady(ctx, ns, name, 2)
		}
		Expect(enforcerPids(ns)).To(Equal(pids))
		for _, pod := range sluice.Kubelet.Pods() {
			if pod.Namespace == ns {
				Expect(pod.Sidecars).To(HaveKeyWithValue("sluice-enforcer", HaveField("Restarts", BeZero())))
			}
		}
		// Redis restarted empty: every tenant starts afresh, and what the
		// fallback counted locally did not leak into the shared counts.
		for path, limit := range map[string]int{"/open": 5, "/closed": 5, "/fallback": 10} {
			for _, tenant := range []string{"tenant-open", "tenant-closed", "tenant-fallback"} {
				replies := spread(eps, limit+3, http.MethodGet, path, "X-Tenant-ID", tenant)
				Expect(codes(replies)).To(Equal(map[int]int{http.StatusOK: limit, http.StatusTooManyRequests: 3}), "%s as %s", path, tenant)
			}
		}
	})
})
