package enforcer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// problem is the application/problem+json body of a refusal.
type problem struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail"`
	Policy     string `json:"policy"`
	Rule       string `json:"rule"`
	RetryAfter int64  `json:"retryAfter"`
}

func refusal(g Gomega, r response) problem {
	g.Expect(r.header.Get("Content-Type")).To(Equal("application/problem+json"))
	var p problem
	g.Expect(json.Unmarshal([]byte(r.body), &p)).To(Succeed(), r.body)
	g.Expect(strconv.FormatInt(p.RetryAfter, 10)).To(Equal(r.header.Get("Retry-After")))
	return p
}

func TestEachAlgorithmAllowsThenRefuses(t *testing.T) {
	for _, algorithm := range []string{"TokenBucket", "SlidingWindowLog", "SlidingWindowCounter", "FixedWindow"} {
		t.Run(algorithm, func(t *testing.T) {
			g := NewWithT(t)
			e := start(t, setup{policies: policy("limits", `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: api
      algorithm: `+algorithm+`
      limits: [{requests: 3, period: 1m}]`)})
			for remaining := 2; remaining >= 0; remaining-- {
				r := get(t, e.url+"/v1/orders", "X-Tenant-ID: acme")
				g.Expect(r.status).To(Equal(200))
				g.Expect(r.body).To(Equal("ok"))
				g.Expect(r.header.Get("X-RateLimit-Limit")).To(Equal("3"))
				g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal(strconv.Itoa(remaining)))
				reset, err := strconv.ParseInt(r.header.Get("X-RateLimit-Reset"), 10, 64)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(reset).To(BeNumerically(">=", time.Now().Unix()))
				// Fully replenished within the period, or two for a sliding
				// window counter whose current window has requests.
				g.Expect(reset).To(BeNumerically("<=", time.Now().Add(121*time.Second).Unix()))
				g.Expect(r.header.Get("RateLimit-Policy")).To(Equal(`"limits/api";q=3;w=60`))
				g.Expect(r.header.Get("RateLimit")).To(MatchRegexp(`^"limits/api";r=%d;t=([1-9]|[1-9][0-9]|1[01][0-9]|120)$`, remaining))
				g.Expect(r.header.Get("Retry-After")).To(BeEmpty())
			}
			r := get(t, e.url+"/v1/orders", "X-Tenant-ID: acme")
			g.Expect(r.status).To(Equal(429))
			g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
			g.Expect(r.header.Get("RateLimit")).To(MatchRegexp(`^"limits/api";r=0;t=\d+$`))
			p := refusal(g, r)
			g.Expect(p).To(matchProblem("https://sluice.dev/problems/rate-limited", 429, "limits", "api"))
			g.Expect(p.RetryAfter).To(BeNumerically(">=", 1))
			// A sliding window counter may have to wait into the next window,
			// until the current one weighs little enough: up to two periods.
			maxWait := int64(60)
			if algorithm == "SlidingWindowCounter" {
				maxWait = 120
			}
			g.Expect(p.RetryAfter).To(BeNumerically("<=", maxWait))
			g.Expect(p.Detail).To(Equal(fmt.Sprintf("Rule api of policy limits allows 3 requests per 1m. Retry in %d s.", p.RetryAfter)))

			// Another tenant is counted apart.
			g.Expect(get(t, e.url+"/v1/orders", "X-Tenant-ID: globex").header.Get("X-RateLimit-Remaining")).To(Equal("2"))
		})
	}
}

// matchProblem checks the identifying fields of a problem.
func matchProblem(typ string, status int, policy, rule string) OmegaMatcher {
	return And(
		WithTransform(func(p problem) string { return p.Type }, Equal(typ)),
		WithTransform(func(p problem) int { return p.Status }, Equal(status)),
		WithTransform(func(p problem) string { return p.Policy }, Equal(policy)),
		WithTransform(func(p problem) string { return p.Rule }, Equal(rule)),
	)
}

// TestMultiWindow: both windows must admit a request, and a request refused
// by the short window consumes nothing from the long one.
func TestMultiWindow(t *testing.T) {
	g := NewWithT(t)
	e := start(t, setup{policies: policy("multi", `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: exports
      algorithm: SlidingWindowLog
      limits: [{requests: 2, period: 2s}, {requests: 3, period: 1h}]`)})
	g.Expect(get(t, e.url, "X-Tenant-ID: acme").header.Get("X-RateLimit-Remaining")).To(Equal("1"))
	r := get(t, e.url, "X-Tenant-ID: acme")
	g.Expect(r.status).To(Equal(200))
	g.Expect(r.header.Get("X-RateLimit-Limit")).To(Equal("2"), "the short window has fewest remaining")
	g.Expect(r.header.Get("RateLimit-Policy")).To(Equal(`"multi/exports";q=2;w=2`))
	for range 3 { // refused by the 2s window: must not count in the hour
		r = get(t, e.url, "X-Tenant-ID: acme")
		g.Expect(r.status).To(Equal(429))
		g.Expect(r.header.Get("X-RateLimit-Limit")).To(Equal("2"))
		g.Expect(r.header.Get("Retry-After")).To(MatchRegexp(`^[12]$`))
	}
	time.Sleep(2100 * time.Millisecond)
	r = get(t, e.url, "X-Tenant-ID: acme")
	g.Expect(r.status).To(Equal(200), "the hour window saw only 2 requests")
	g.Expect(r.header.Get("X-RateLimit-Limit")).To(Equal("3"))
	g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
	r = get(t, e.url, "X-Tenant-ID: acme")
	g.Expect(r.status).To(Equal(429))
	g.Expect(r.header.Get("X-RateLimit-Limit")).To(Equal("3"), "refused by the hour window")
	g.Expect(refusal(g, r).RetryAfter).To(BeNumerically(">", 3000))
}

const tiersAndOverrides = `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  tiers: {source: {header: {name: X-Plan}}, default: free}
  rules:
    - name: health
      match: {paths: [{exact: /healthz}]}
      exempt: true
    - name: plans
      algorithm: FixedWindow
      limits:
        - {tier: free, requests: 1, period: 1h}
        - {tier: premium, requests: 3, period: 1h}
  overrides:
    - {tenant: acme, rule: plans, limits: [{requests: 5, period: 1h}]}`

func TestTiersOverridesAndExemptRoutes(t *testing.T) {
	g := NewWithT(t)
	e := start(t, setup{policies: policy("plans", tiersAndOverrides)})
	cases := []struct {
		tenant, plan string
		limit        string
		allowed      int
	}{
		{"t-free", "free", "1", 1},
		{"t-unknown-plan", "platinum", "1", 1}, // an unknown tier is the default
		{"t-no-plan", "", "1", 1},
		{"t-premium", "premium", "3", 3},
		{"acme", "free", "5", 5}, // an override wins over the tier, whichever it is
	}
	for _, tc := range cases {
		headers := []string{"X-Tenant-ID: " + tc.tenant}
		if tc.plan != "" {
			headers = append(headers, "X-Plan: "+tc.plan)
		}
		for i := range tc.allowed {
			if tc.tenant == "acme" && i%2 == 1 { // the same bucket, under the premium plan
				headers = []string{"X-Tenant-ID: acme", "X-Plan: premium"}
			} else if tc.tenant == "acme" {
				headers = []string{"X-Tenant-ID: acme", "X-Plan: free"}
			}
			r := get(t, e.url+"/v1/products", headers...)
			g.Expect(r.status).To(Equal(200), "%s request %d", tc.tenant, i+1)
			g.Expect(r.header.Get("X-RateLimit-Limit")).To(Equal(tc.limit), tc.tenant)
		}
		g.Expect(get(t, e.url+"/v1/products", headers...).status).To(Equal(429), tc.tenant)
	}
	for range 5 {
		r := get(t, e.url+"/healthz", "X-Tenant-ID: t-free")
		g.Expect(r.status).To(Equal(200), "exempt")
		g.Expect(limitHeaders(r)).To(Equal([5]string{}), "an exempt route carries no limit headers")
	}
	g.Expect(get(t, e.url+"/healthz/", "X-Tenant-ID: t-free").status).To(Equal(429), "exact means exact")
}

func TestDryRunReportsButNeverRefuses(t *testing.T) {
	g := NewWithT(t)
	e := start(t, setup{policies: policy("shadow", `  mode: DryRun
  identity: {sources: [{shared: {}}]}
  rules:
    - name: all
      algorithm: TokenBucket
      limits: [{requests: 1, period: 1h}]`)})
	g.Expect(get(t, e.url).header.Get("X-Sluice-Would-Deny")).To(BeEmpty())
	for range 3 {
		r := get(t, e.url)
		g.Expect(r.status).To(Equal(200))
		g.Expect(r.header.Get("X-Sluice-Would-Deny")).To(Equal("shadow/all"))
	}
	var st struct {
		Decisions map[string]map[string]int64 `json:"decisions"`
	}
	g.Expect(json.Unmarshal([]byte(get(t, e.admin+"/status").body), &st)).To(Succeed())
	g.Expect(st.Decisions["shadow"]).To(Equal(map[string]int64{"allowed": 1, "denied": 0, "wouldDeny": 3, "failureMode": 0}))
	g.Expect(get(t, e.admin+"/metrics").body).To(ContainSubstring(`sluice_enforcer_decisions_total{decision="would_deny",policy="shadow",rule="all",tier=""} 3`))
}
