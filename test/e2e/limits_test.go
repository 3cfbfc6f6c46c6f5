package e2e

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/stack"
)

// Every policy of the suite gives Redis a generous timeout: the specs check
// what is decided, on a machine busy with other tests, not how fast.
// Short windows, so that a few seconds of traffic cross several of them.
const sharedPolicy = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: shared}
spec:
  selector: {matchLabels: {app: shared}}
  upstreamPort: 8080
  timeout: 1s
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: log
      match: {paths: [{prefix: /log}]}
      algorithm: SlidingWindowLog
      limits: [{requests: 10, period: 2s}]
    - name: bucket
      match: {paths: [{prefix: /bucket}]}
      algorithm: TokenBucket
      limits: [{requests: 10, period: 2s, burst: 10}]
`

var _ = Describe("Two enforcer replicas", Ordered, func() {
	var eps []stack.Endpoint
	BeforeAll(func(ctx SpecContext) {
		eps = deploy(ctx, "e2e-shared", sharedPolicy, "shared", 8080, 2)
	})

	It("share a sliding log: never more than its limit in any window", func() {
		const limit, window = 10, 2 * time.Second
		before := served(eps)
		replies := flood(eps, 4, 5*time.Second, http.MethodGet, "/log", "X-Tenant-ID", "tenant-a")
		allowed := withCode(replies, http.StatusOK)
		Expect(codes(replies)).To(HaveLen(2), "every answer is 200 or 429: %v", codes(replies))
		Expect(served(eps)-before).To(BeEquivalentTo(len(allowed)), "refused requests never reach the application")

		// The enforcer decided between sending and receiving. Any limit+1
		// allowed requests all decided within less than a window break
		// the limit, wherever the window starts.
		slices.SortFunc(allowed, func(a, b reply) int { return a.sent.Compare(b.sent) })
		for i := 0; i+limit < len(allowed); i++ {
			last := allowed[i].received
			for _, r := range allowed[i : i+limit+1] {
				if r.received.After(last) {
					last = r.received
				}
			}
			Expect(last.Sub(allowed[i].sent)).To(BeNumerically(">=", window),
				"%d requests allowed within %s, from %s", limit+1, last.Sub(allowed[i].sent), allowed[i].sent.Format("15:04:05.000"))
		}
		// Five seconds of traffic span at least two full windows, and both
		// replicas answered from the one log.
		Expect(len(allowed)).To(BeNumerically(">=", 2*limit))
		Expect(len(allowed)).To(BeNumerically("<=", 3*limit))
		pods := map[string]bool{}
		for _, r := range allowed {
			pods[r.pod] = true
		}
		Expect(pods).To(HaveLen(2))
	})

	It("share a token bucket: within capacity + rate × time", func() {
		const capacity, rate = 10, 5.0 // 10 requests per 2s
		replies := flood(eps, 4, 4*time.Second, http.MethodGet, "/bucket", "X-Tenant-ID", "tenant-b")
		allowed := withCode(replies, http.StatusOK)
		Expect(codes(replies)).To(HaveLen(2), "every answer is 200 or 429: %v", codes(replies))
		slices.SortFunc(allowed, func(a, b reply) int { return a.sent.Compare(b.sent) })
		// Over every stretch of allowed requests: no more than a full
		// bucket plus what refilled meanwhile (one token of slack for the
		// refill reaching a whole token between two decisions).
		for i := range allowed {
			last := allowed[i].received
			for j := i; j < len(allowed); j++ {
				if allowed[j].received.After(last) {
					last = allowed[j].received
				}
				elapsed := last.Sub(allowed[i].sent).Seconds()
				Expect(float64(j-i+1)).To(BeNumerically("<=", capacity+rate*elapsed+1),
					"%d requests allowed within %.3fs", j-i+1, elapsed)
			}
		}
		span := replies[len(replies)-1].received.Sub(replies[0].sent).Seconds()
		Expect(float64(len(allowed))).To(BeNumerically(">=", capacity+rate*span*0.8), "the bucket refills at its rate")
	})
})

const plansPolicy = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: plans}
spec:
  selector: {matchLabels: {app: plans}}
  upstreamPort: 8080
  timeout: 1s
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  tiers: {source: {header: {name: X-Plan}}, default: free}
  rules:
    - name: health
      match: {paths: [{exact: /healthz}]}
      exempt: true
    - name: api
      algorithm: SlidingWindowLog
      limits:
        - {tier: free, requests: 5, period: 1m}
        - {tier: premium, requests: 20, period: 1m}
  overrides:
    - {tenant: acme, rule: api, limits: [{requests: 30, period: 1m}]}
`

var _ = Describe("Tiers and overrides", Ordered, func() {
	var eps []stack.Endpoint
	BeforeAll(func(ctx SpecContext) {
		eps = deploy(ctx, "e2e-plans", plansPolicy, "plans", 8080, 2)
	})

	DescribeTable("give each tenant its documented limit, across both replicas",
		func(tenant, plan string, limit int) {
			headers := []string{"X-Tenant-ID", tenant}
			if plan != "" {
				headers = append(headers, "X-Plan", plan)
			}
			replies := spread(eps, limit+10, http.MethodGet, "/v1/products", headers...)
			Expect(codes(replies)).To(Equal(map[int]int{http.StatusOK: limit, http.StatusTooManyRequests: 10}))
			Expect(slices.Compact(limitHeaders(replies))).To(Equal([]string{strconv.Itoa(limit)}))
			Expect(replies[limit].header.Get("Retry-After")).NotTo(BeEmpty())
		},
		Entry("free plan", "initech", "free", 5),
		Entry("no plan: the default tier", "hooli", "", 5),
		Entry("an unknown plan: the default tier", "pied-piper", "gold", 5),
		Entry("premium plan", "umbrella", "premium", 20),
		Entry("acme's override, whatever its plan", "acme", "free", 30),
	)

	It("never limits exempt routes", func() {
		// initech has used up its budget above.
		Expect(request(eps[0], http.MethodGet, "/v1/products", "X-Tenant-ID", "initech").code).To(Equal(http.StatusTooManyRequests))
		replies := spread(eps, 100, http.MethodGet, "/healthz", "X-Tenant-ID", "initech")
		Expect(codes(replies)).To(Equal(map[int]int{http.StatusOK: 100}))
		Expect(slices.Compact(limitHeaders(replies))).To(Equal([]string{""}), "an exempt route is not counted")
	})
})
