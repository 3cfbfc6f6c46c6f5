package e2e

import (
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/stack"
)

const loginPolicy = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: login}
spec:
  selector: {matchLabels: {app: accounts}}
  upstreamPort: 8080
  timeout: 1s
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: login
      match: {methods: [POST], paths: [{exact: /login}]}
      algorithm: SlidingWindowLog
      limits: [{requests: 2, period: 1m}]
      ban:
        after: {denials: 3, within: 1m}
        durations: [1h]
`

var _ = Describe("A ban", Ordered, func() {
	const namespace = "e2e-bans"
	var eps []stack.Endpoint
	BeforeAll(func(ctx SpecContext) {
		eps = deploy(ctx, namespace, loginPolicy, "accounts", 8080, 2)
	})

	It("refuses the banned tenant on every replica and shows in the policy's status", func(ctx SpecContext) {
		expectReady(ctx, namespace, "login", 2)
		var last reply
		for range 5 { // 2 admitted, then the third refusal starts the ban
			last = request(eps[0], http.MethodPost, "/login", "X-Tenant-ID", "mallory")
		}
		Expect(last.code).To(Equal(http.StatusTooManyRequests))
		Expect(last.body).To(ContainSubstring("https://sluice.dev/problems/banned"))
		other := request(eps[1], http.MethodPost, "/login", "X-Tenant-ID", "mallory")
		Expect(other.body).To(ContainSubstring("https://sluice.dev/problems/banned"), "the other replica reads the ban from Redis")
		Expect(request(eps[1], http.MethodPost, "/login", "X-Tenant-ID", "alice").code).To(Equal(http.StatusOK), "another tenant is not banned")

		Eventually(func(g Gomega) {
			p := policy(ctx, namespace, "login")
			g.Expect(p.Status.Bans).NotTo(BeNil())
			g.Expect(p.Status.Bans.Active).To(BeEquivalentTo(1))
			g.Expect(p.Status.Decisions.Banned).To(BeNumerically(">=", 2))
			g.Expect(p.Status.Decisions.Denied).To(BeEquivalentTo(2), "the refusals before the ban")
		}).Should(Succeed())
	})
})
