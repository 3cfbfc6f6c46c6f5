package enforcer

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
)

// debugReport is the part of a /debug/tenant report these tests read.
type debugReport struct {
	Refused           bool   `json:"refused"`
	RetryAfterSeconds *int64 `json:"retryAfterSeconds"`
	RefusedBy         *struct {
		Policy, Rule string
	} `json:"refusedBy"`
	Rules []struct {
		Rule              string `json:"rule"`
		Tier              string `json:"tier"`
		TierReason        string `json:"tierReason"`
		Limit             int64  `json:"limit"`
		Remaining         int64  `json:"remaining"`
		Allowed           bool   `json:"allowed"`
		RetryAfterSeconds *int64 `json:"retryAfterSeconds"`
		Ban               *struct {
			Banned bool `json:"banned"`
		} `json:"ban"`
	} `json:"rules"`
}

func debugTenant(t *testing.T, g Gomega, addr, query string) debugReport {
	t.Helper()
	r := get(t, "http://"+addr+"/debug/tenant?"+query)
	g.Expect(r.status).To(Equal(200), r.body)
	var out debugReport
	g.Expect(json.Unmarshal([]byte(r.body), &out)).To(Succeed(), r.body)
	return out
}

// refusedAsThe429 asks /debug/tenant about tenant between two refused
// requests (send), until their Retry-After agree (the wait loses a second
// as the clock passes one), and returns the report and that Retry-After.
func refusedAsThe429(t *testing.T, g Gomega, send func() response, addr, query string) (debugReport, string) {
	t.Helper()
	for range 5 {
		before := send()
		g.Expect(before.status).To(Equal(429), before.body)
		r := debugTenant(t, g, addr, query)
		if after := send(); after.header.Get("Retry-After") == before.header.Get("Retry-After") {
			return r, before.header.Get("Retry-After")
		}
	}
	t.Fatal("the Retry-After of two refusals in a row never agreed")
	return debugReport{}, ""
}

// TestDebugTenantRetryAfterIsThe429s: a tenant that a real request found
// refused is refused in /debug/tenant, asked with the tenant alone, with
// the 429's Retry-After and rule, whatever the algorithm; before, it is
// allowed and carries no retry.
func TestDebugTenantRetryAfterIsThe429s(t *testing.T) {
	debug := freeAddr(t)
	e := start(t, setup{policies: policy("algos", `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - {name: tb, match: {paths: [{prefix: /tb}]}, algorithm: TokenBucket, limits: [{requests: 2, period: 1h}]}
    - {name: fw, match: {paths: [{prefix: /fw}]}, algorithm: FixedWindow, limits: [{requests: 2, period: 1h}]}
    - {name: swl, match: {paths: [{prefix: /swl}]}, algorithm: SlidingWindowLog, limits: [{requests: 2, period: 1h}]}
    - {name: swc, match: {paths: [{prefix: /swc}]}, algorithm: SlidingWindowCounter, limits: [{requests: 2, period: 1h}]}
    - {name: gcra, match: {paths: [{prefix: /gcra}]}, algorithm: GCRA, limits: [{requests: 2, period: 1h}]}`),
		args: []string{"--debug-listen", debug}})
	for _, rule := range []string{"tb", "fw", "swl", "swc", "gcra"} {
		t.Run(rule, func(t *testing.T) {
			g := NewWithT(t)
			tenant := tenantOf(t, rule)
			query := "tenant=" + url.QueryEscape(tenant[len("X-Tenant-ID: "):]) + "&path=/" + rule
			send := func() response { return get(t, e.url+"/"+rule, tenant) }

			r := debugTenant(t, g, debug, query)
			g.Expect(r.Refused).To(BeFalse())
			g.Expect(r.RetryAfterSeconds).To(BeNil())
			g.Expect(r.Rules).To(HaveLen(1))
			g.Expect(r.Rules[0].Allowed).To(BeTrue())
			g.Expect(r.Rules[0].RetryAfterSeconds).To(BeNil())
			for range 2 {
				g.Expect(send().status).To(Equal(200))
			}

			r, retryAfter := refusedAsThe429(t, g, send, debug, query)
			g.Expect(r.Refused).To(BeTrue())
			g.Expect(r.RefusedBy).NotTo(BeNil())
			g.Expect(r.RefusedBy.Rule).To(Equal(rule))
			g.Expect(r.RetryAfterSeconds).NotTo(BeNil())
			g.Expect(strconv.FormatInt(*r.RetryAfterSeconds, 10)).To(Equal(retryAfter))
			g.Expect(r.Rules[0].Allowed).To(BeFalse())
			g.Expect(r.Rules[0].Remaining).To(BeZero())
			g.Expect(r.Rules[0].RetryAfterSeconds).To(Equal(r.RetryAfterSeconds))
		})
	}
}

// TestDebugTenantShowsABansRetryAfter: a banned tenant is refused until
// its ban ends, as its 429 says.
func TestDebugTenantShowsABansRetryAfter(t *testing.T) {
	g := NewWithT(t)
	debug := freeAddr(t)
	e := start(t, setup{policies: loginPolicy("auth", "1h", "24h"), args: []string{"--debug-listen", debug}})
	tenant := tenantOf(t, "mallory")
	banTenant(t, g, e, tenant)
	query := "tenant=" + url.QueryEscape(tenant[len("X-Tenant-ID: "):]) + "&method=POST&path=/login"
	r, retryAfter := refusedAsThe429(t, g, func() response { return do(t, http.MethodPost, e.url+"/login", tenant) }, debug, query)
	g.Expect(r.Refused).To(BeTrue())
	g.Expect(strconv.FormatInt(*r.RetryAfterSeconds, 10)).To(Equal(retryAfter))
	g.Expect(*r.RetryAfterSeconds).To(BeNumerically("~", 3600, 60), "the ban's end, not the 1s window's")
	g.Expect(r.Rules[0].Ban).NotTo(BeNil())
	g.Expect(r.Rules[0].Ban.Banned).To(BeTrue())
}

// TestDebugTenantReadsTheTierFromTheHeader: a premium tenant asked about
// with its X-Plan header, and no tier, is shown its premium limit; without
// the header it is shown the default tier's.
func TestDebugTenantReadsTheTierFromTheHeader(t *testing.T) {
	g := NewWithT(t)
	debug := freeAddr(t)
	e := start(t, setup{policies: policy("plans", `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  tiers: {source: {header: {name: X-Plan}}, default: free}
  rules:
    - name: plans
      algorithm: SlidingWindowCounter
      limits:
        - {tier: free, requests: 2, period: 1h}
        - {tier: premium, requests: 10, period: 1h}`), args: []string{"--debug-listen", debug}})
	tenant := tenantOf(t, "bigco")
	for range 3 {
		g.Expect(get(t, e.url+"/v1/orders", tenant, "X-Plan: premium").status).To(Equal(200))
	}
	query := "tenant=" + url.QueryEscape(tenant[len("X-Tenant-ID: "):])
	r := debugTenant(t, g, debug, query+"&header="+url.QueryEscape("X-Plan:premium"))
	g.Expect(r.Rules).To(HaveLen(1))
	g.Expect(r.Rules[0].Tier).To(Equal("premium"))
	g.Expect(r.Rules[0].TierReason).To(Equal("header X-Plan names tier premium"))
	g.Expect([2]int64{r.Rules[0].Limit, r.Rules[0].Remaining}).To(Equal([2]int64{10, 7}))
	g.Expect(r.Refused).To(BeFalse())

	r = debugTenant(t, g, debug, query)
	g.Expect(r.Rules[0].Tier).To(Equal("free"))
	g.Expect(r.Rules[0].TierReason).To(Equal("no header X-Plan: the default tier free"))
	g.Expect(r.Rules[0].Limit).To(Equal(int64(2)))
	g.Expect(r.Refused).To(BeTrue(), "the premium requests count under the free tier too")
}
