package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/debugapi"
)

// shopPolicies: "shop" has an exempt /healthz, a catch-all rule with
// tiers (free 2/h, premium 5/h) and a POST /v1/exports rule; "audit", in
// DryRun, counts every request once an hour.
func shopPolicies(t *testing.T) *config.Config {
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"schema": %q, "namespace": %q, "policies": [
{"name": "shop", "uid": "u1", "generation": 1, "selector": {}, "replicas": 1, "upstreamPort": 8080,
 "mode": "Enforce", "failureMode": "Open", "timeout": "1s", "responseHeaders": "Both", "salt": "s1",
 "tiers": {"source": {"header": {"name": "X-Plan"}}, "default": "free"},
 "rules": [
  {"name": "health", "exempt": true, "match": {"paths": [{"exact": "/healthz"}]}},
  {"name": "api", "match": {}, "algorithm": "FixedWindow", "cost": 1,
   "identity": {"sources": [{"header": {"name": "X-Tenant"}}]},
   "limits": [{"requests": 2, "period": "1h"}],
   "tierLimits": {"free": [{"requests": 2, "period": "1h"}], "premium": [{"requests": 5, "period": "1h"}]}},
  {"name": "exports", "match": {"methods": ["POST"], "paths": [{"prefix": "/v1/exports"}]}, "algorithm": "SlidingWindowLog", "cost": 1,
   "identity": {"sources": [{"header": {"name": "X-Tenant"}}]},
   "limits": [{"requests": 1, "period": "1m"}, {"requests": 3, "period": "1h"}]}]},
{"name": "audit", "uid": "u2", "generation": 1, "selector": {}, "replicas": 1, "upstreamPort": 8080,
 "mode": "DryRun", "failureMode": "Open", "timeout": "1s", "responseHeaders": "None", "salt": "s2",
 "rules": [{"name": "all", "match": {}, "algorithm": "TokenBucket", "cost": 1,
   "identity": {"sources": [{"header": {"name": "X-Tenant"}}]}, "limits": [{"requests": 1, "period": "1h"}]}]}]}`,
		config.Schema, ns)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func report(g Gomega, url string) (debugapi.TenantReport, map[string]any) {
	code, body := fetch(g, url)
	g.Expect(code).To(Equal(200), body)
	var r debugapi.TenantReport
	g.Expect(json.Unmarshal([]byte(body), &r)).To(Succeed())
	var raw map[string]any
	g.Expect(json.Unmarshal([]byte(body), &raw)).To(Succeed())
	return r, raw
}

func ruleNames(r debugapi.TenantReport) []string {
	var out []string
	for _, u := range r.Rules {
		out = append(out, u.Policy+"/"+u.Rule)
	}
	return out
}

// TestDebugTenantListsTheRulesThatApply: without a rule, every rule a
// request of the tenant could meet is listed; method and path narrow it
// to those one request meets, an exempt rule included.
func TestDebugTenantListsTheRulesThatApply(t *testing.T) {
	f := start(t, shopPolicies(t), redisURL)
	for query, want := range map[string][]string{
		"":                                  {"shop/api", "shop/exports", "audit/all"},
		"&policy=shop":                      {"shop/api", "shop/exports"},
		"&method=GET&path=/v1/orders":       {"shop/api", "audit/all"},
		"&method=POST&path=/V1/Exports/x":   {"shop/api", "shop/exports", "audit/all"},
		"&path=/v1/exports/x":               {"shop/api", "shop/exports", "audit/all"},
		"&method=GET&path=/healthz":         {"audit/all"},
		"&path=/healthz&header=X-Plan:gold": {"audit/all"},
	} {
		t.Run(query, func(t *testing.T) {
			g := NewWithT(t)
			r, _ := report(g, f.debug+"/debug/tenant?tenant=acme"+query)
			g.Expect(ruleNames(r)).To(Equal(want))
			if strings.Contains(query, "healthz") {
				g.Expect(r.ExemptBy).To(Equal([]debugapi.RuleRef{{Policy: "shop", Rule: "health"}}))
			} else {
				g.Expect(r.ExemptBy).To(BeEmpty())
			}
		})
	}
}

// TestDebugTenantResolvesTheTierFromHeaders: the tier comes from the
// headers given as the proxy reads them, the default when they name no
// tier of the policy, and usage is the tenant's whatever tier it is read
// under.
func TestDebugTenantResolvesTheTierFromHeaders(t *testing.T) {
	g := NewWithT(t)
	f := start(t, shopPolicies(t), redisURL)
	for range 3 {
		code, _ := fetch(g, f.proxy+"/v1/orders", "X-Tenant: bigco", "X-Plan: premium")
		g.Expect(code).To(Equal(200))
	}
	api := func(query string) debugapi.TenantUsage {
		r, _ := report(g, f.debug+"/debug/tenant?tenant=bigco&policy=shop&method=GET&path=/v1/orders"+query)
		g.Expect(r.Rules).To(HaveLen(1))
		return r.Rules[0]
	}
	u := api("&header=x-plan:%20premium")
	g.Expect(u.Tier).To(Equal("premium"))
	g.Expect(u.TierReason).To(Equal("header X-Plan names tier premium"))
	g.Expect([3]int64{u.Limit, u.Remaining, u.RetryAfterSeconds}).To(Equal([3]int64{5, 2, 0}))
	g.Expect(u.Allowed).To(BeTrue())

	u = api("")
	g.Expect(u.Tier).To(Equal("free"))
	g.Expect(u.TierReason).To(Equal("no header X-Plan: the default tier free"))
	g.Expect([2]int64{u.Limit, u.Remaining}).To(Equal([2]int64{2, 0}), "the 3 premium requests count under free too")
	g.Expect(u.Allowed).To(BeFalse())
	g.Expect(u.RetryAfterSeconds).To(BeNumerically(">=", 1))

	u = api("&header=X-Plan:Premium")
	g.Expect(u.Tier).To(Equal("free"))
	g.Expect(u.TierReason).To(ContainSubstring(`names "Premium", which is not premium (tiers are compared case-sensitively): the default tier free`))
	code, _ := fetch(g, f.proxy+"/v1/orders", "X-Tenant: bigco", "X-Plan: Premium")
	g.Expect(code).To(Equal(429), "the proxy agrees: Premium is the free tier")

	u = api("&tier=premium")
	g.Expect(u.Tier).To(Equal("premium"))
	g.Expect(u.TierReason).To(Equal("tier=premium in the query names tier premium"))

	// the one-rule answer, as before, resolves the tier the same way
	code, body := fetch(g, f.debug+"/debug/tenant?tenant=bigco&policy=shop&rule=api&header=X-Plan:premium")
	g.Expect(code).To(Equal(200), body)
	g.Expect(json.Unmarshal([]byte(body), &u)).To(Succeed())
	g.Expect([2]int64{u.Limit, u.Remaining}).To(Equal([2]int64{5, 2}))
}

// TestDebugTenantRefusalIsThe429s: a refused tenant is refused in the
// report, with the Retry-After and the rule of the 429 it gets; a DryRun
// refusal is a would-deny, and an allowed tenant carries no retry.
func TestDebugTenantRefusalIsThe429s(t *testing.T) {
	g := NewWithT(t)
	f := start(t, shopPolicies(t), redisURL)
	r, raw := report(g, f.debug+"/debug/tenant?tenant=carol&method=POST&path=/v1/exports")
	g.Expect(r.Refused).To(BeFalse())
	g.Expect(raw).NotTo(HaveKey("retryAfterSeconds"))
	g.Expect(raw).NotTo(HaveKey("refusedBy"))
	for _, u := range raw["rules"].([]any) {
		g.Expect(u).NotTo(HaveKey("retryAfterSeconds"))
	}

	code, _ := fetch(g, f.proxy+"/v1/exports", "X-Tenant: carol") // GET: only api and audit count it
	g.Expect(code).To(Equal(200))
	code, _ = post(g, f.proxy+"/v1/exports", "X-Tenant: carol")
	g.Expect(code).To(Equal(200))
	// the 429s just before and just after the report, until they agree
	// (the wait shrinks by a second as the clock passes one)
	var before, after string
	for range 5 {
		code, before = post(g, f.proxy+"/v1/exports", "X-Tenant: carol")
		g.Expect(code).To(Equal(429))
		r, _ = report(g, f.debug+"/debug/tenant?tenant=carol&method=POST&path=/v1/exports")
		if _, after = post(g, f.proxy+"/v1/exports", "X-Tenant: carol"); before == after {
			break
		}
	}
	g.Expect(before).To(Equal(after))
	g.Expect(r.Refused).To(BeTrue())
	g.Expect(strconv.FormatInt(r.RetryAfterSeconds, 10)).To(Equal(before))
	g.Expect(r.WouldDeny).To(BeTrue(), "audit's one an hour is spent")
	// the 429 names the refusing rule with the longest wait
	longest := r.Rules[0]
	for _, u := range r.Rules {
		if !u.DryRun && u.RetryAfterSeconds > longest.RetryAfterSeconds {
			longest = u
		}
	}
	g.Expect(r.RefusedBy).To(Equal(&debugapi.RuleRef{Policy: "shop", Rule: longest.Rule}))
	g.Expect(longest.RetryAfterSeconds).To(Equal(r.RetryAfterSeconds))
	byRule := map[string]debugapi.TenantUsage{}
	for _, u := range r.Rules {
		byRule[u.Policy+"/"+u.Rule] = u
	}
	exports := byRule["shop/exports"]
	g.Expect(exports.Allowed).To(BeFalse())
	g.Expect(exports.Limit).To(Equal(int64(1)), "the minute window refuses and decides")
	g.Expect(exports.RetryAfterSeconds).To(BeNumerically("~", 60, 2))
	g.Expect(exports.Windows).To(HaveLen(2))
	g.Expect([2]bool{exports.Windows[0].Refusing, exports.Windows[1].Refusing}).To(Equal([2]bool{true, false}))
	g.Expect([2]int64{exports.Windows[0].Remaining, exports.Windows[1].Remaining}).To(Equal([2]int64{0, 2}))
	g.Expect(byRule["audit/all"].DryRun).To(BeTrue())
	g.Expect(byRule["audit/all"].Allowed).To(BeFalse())
}

func TestDebugTenantRefusesBadQueries(t *testing.T) {
	f := start(t, shopPolicies(t), redisURL)
	for query, want := range map[string]string{
		"rule=api":                "rule needs policy",
		"header=X-Plan":           "a header parameter is Name:Value",
		"header=X%20Plan:premium": "a header parameter is Name:Value",
		"policy=nope":             `policy \"nope\" is not applied`,
		"policy=shop&rule=health": `policy shop has no limited rule \"health\"`,
		"tenant=a" + strings.Repeat("&header=A:b", maxDebugHeaders+1): "at most 32 header parameters",
	} {
		t.Run(query[:min(len(query), 30)], func(t *testing.T) {
			g := NewWithT(t)
			code, body := fetch(g, f.debug+"/debug/tenant?"+query)
			g.Expect(code).To(BeNumerically(">=", 400))
			g.Expect(body).To(ContainSubstring(want))
		})
	}
}

// post sends a POST and returns its status and Retry-After.
func post(g Gomega, url string, headers ...string) (int, string) {
	req, _ := http.NewRequest("POST", url, nil)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After")
}
