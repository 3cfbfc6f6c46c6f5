package rules

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/request"
)

// newRequest builds a request with headers given as "Name: value", in the
// canonical form the proxy hands to the table (target and Host as
// request.Canonicalize leaves them, headers as they are).
func newRequest(method, target string, headers ...string) *request.Request {
	r := httptest.NewRequest(method, target, nil)
	h := http.Header{}
	for _, line := range headers {
		name, value, _ := strings.Cut(line, ": ")
		h.Add(name, value)
	}
	host := r.Host
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	c := request.Known(method, strings.TrimSuffix(host, "."), r.URL.Path, h)
	c.RemoteAddr = "203.0.113.9:51234"
	return &c
}

func bearer(payload string) string {
	enc := base64.RawURLEncoding
	return "Authorization: Bearer " + enc.EncodeToString([]byte(`{"alg":"RS256"}`)) + "." + enc.EncodeToString([]byte(payload)) + ".c2ln"
}

// shop is the example configuration with both policies applying.
func shop(t testing.TB) *Table {
	t.Helper()
	c, err := config.Load("../config/testdata/shop.json")
	if err != nil {
		t.Fatal(err)
	}
	table, err := New(c.ForPod(map[string]string{"app": "api", "tier": "admin"}))
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// applied names the checks as policy/rule.
func applied(checks []Check) []string {
	out := []string{}
	for _, c := range checks {
		out = append(out, c.Policy.Name+"/"+c.Rule.Name)
	}
	return out
}

// oneRule is a table of one policy with one rule matching m.
func oneRule(t *testing.T, m config.Match) *Table {
	t.Helper()
	table, err := New(&config.Config{Schema: config.Schema, Namespace: "ns", Policies: []config.Policy{{
		Name: "p", Mode: "Enforce", FailureMode: "Open", ResponseHeaders: "None",
		Timeout: config.Duration{Duration: 50 * time.Millisecond},
		Rules: []config.Rule{{Name: "r", Match: m, Algorithm: "FixedWindow", Cost: 1,
			Identity: config.Identity{Sources: []config.Source{{Shared: &struct{}{}}}},
			Limits:   []config.Limit{{Requests: 10, Period: config.Duration{Duration: time.Second}}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func TestMatching(t *testing.T) {
	paths := func(ps ...config.PathMatch) config.Match { return config.Match{Paths: ps} }
	cases := map[string]struct {
		match  config.Match
		method string
		target string
		want   bool
	}{
		"empty match, anything":       {config.Match{}, "PATCH", "http://x.test/any/thing?q=1", true},
		"exact host":                  {config.Match{Hosts: []string{"api.example.com"}}, "GET", "http://api.example.com/", true},
		"host case and port":          {config.Match{Hosts: []string{"API.example.com"}}, "GET", "http://Api.Example.Com:8443/", true},
		"other host":                  {config.Match{Hosts: []string{"api.example.com"}}, "GET", "http://www.example.com/", false},
		"wildcard host":               {config.Match{Hosts: []string{"*.example.com"}}, "GET", "http://api.example.com/", true},
		"wildcard host, deeper":       {config.Match{Hosts: []string{"*.example.com"}}, "GET", "http://a.b.example.com/", true},
		"wildcard host, not the apex": {config.Match{Hosts: []string{"*.example.com"}}, "GET", "http://example.com/", false},
		"wildcard host, not a suffix": {config.Match{Hosts: []string{"*.example.com"}}, "GET", "http://badexample.com/", false},
		"method":                      {config.Match{Methods: []string{"POST", "PUT"}}, "PUT", "/", true},
		"other method":                {config.Match{Methods: []string{"POST"}}, "GET", "/", false},
		"methods are case-sensitive":  {config.Match{Methods: []string{"POST"}}, "post", "/", false},
		"exact path":                  {paths(config.PathMatch{Exact: "/healthz"}), "GET", "/healthz", true},
		"exact path, query ignored":   {paths(config.PathMatch{Exact: "/healthz"}), "GET", "/healthz?full=1", true},
		"exact path, trailing slash":  {paths(config.PathMatch{Exact: "/login"}), "POST", "/login/", true},
		"exact with slash, without":   {paths(config.PathMatch{Exact: "/login/"}), "POST", "/login", true},
		"exact path, deeper":          {paths(config.PathMatch{Exact: "/login"}), "POST", "/login/x", false},
		"exact root, not deeper":      {paths(config.PathMatch{Exact: "/"}), "GET", "/x/", false},
		"exact path, dot segments":    {paths(config.PathMatch{Exact: "/healthz"}), "GET", "/api/../healthz", true},
		"exact path, encoded":         {paths(config.PathMatch{Exact: "/healthz"}), "GET", "/health%7A", true},
		"prefix, itself":              {paths(config.PathMatch{Prefix: "/v1"}), "GET", "/v1", true},
		"prefix, below":               {paths(config.PathMatch{Prefix: "/v1"}), "GET", "/v1/orders", true},
		"prefix, not v10":             {paths(config.PathMatch{Prefix: "/v1"}), "GET", "/v10/orders", false},
		"prefix with slash, itself":   {paths(config.PathMatch{Prefix: "/v1/"}), "GET", "/v1", true},
		"prefix with slash, not v10":  {paths(config.PathMatch{Prefix: "/v1/"}), "GET", "/v10", false},
		"prefix, double slash":        {paths(config.PathMatch{Prefix: "/v1/exports"}), "GET", "//v1//exports/x", true},
		"prefix, encoded slash":       {paths(config.PathMatch{Prefix: "/v1/exports"}), "GET", "/v1%2Fexports", true},
		"prefix, escape through ..":   {paths(config.PathMatch{Prefix: "/v1/exports"}), "GET", "/v1/exports/../orders", false},
		"root prefix":                 {paths(config.PathMatch{Prefix: "/"}), "GET", "/anything", true},
		"glob":                        {paths(config.PathMatch{Glob: "/v1/*/orders/**"}), "GET", "/v1/acme/orders/7/items", true},
		"glob, ** matches nothing":    {paths(config.PathMatch{Glob: "/v1/exports/**"}), "GET", "/v1/exports", true},
		"glob, * is one segment":      {paths(config.PathMatch{Glob: "/v1/*/orders"}), "GET", "/v1/a/b/orders", false},
		"any of the paths":            {paths(config.PathMatch{Exact: "/a"}, config.PathMatch{Prefix: "/b"}), "GET", "/b/c", true},
		"host, method and path":       {config.Match{Hosts: []string{"api.example.com"}, Methods: []string{"POST"}, Paths: []config.PathMatch{{Prefix: "/v1"}}}, "POST", "http://api.example.com/v1/x", true},
		"host and path, wrong method": {config.Match{Hosts: []string{"api.example.com"}, Methods: []string{"POST"}, Paths: []config.PathMatch{{Prefix: "/v1"}}}, "GET", "http://api.example.com/v1/x", false},
		"GET limits HEAD too":         {config.Match{Methods: []string{"GET"}}, "HEAD", "/", true},
		"HEAD does not limit GET":     {config.Match{Methods: []string{"HEAD"}}, "GET", "/", false},
		"path case ignored":           {paths(config.PathMatch{Prefix: "/v1/exports"}), "GET", "/V1/Exports/x", true},
		"pattern case ignored":        {paths(config.PathMatch{Exact: "/V1/Exports"}), "GET", "/v1/exports", true},
		"long s folds to s":           {paths(config.PathMatch{Exact: "/v1/exports"}), "GET", "/v1/export%C5%BF", true},
		"Kelvin sign folds to k":      {paths(config.PathMatch{Glob: "/v1/*/kits"}), "GET", "/v1/a/%E2%84%AAits", true},
		"format suffix, exact":        {paths(config.PathMatch{Exact: "/v1/exports"}), "GET", "/v1/exports.json", true},
		"format suffix, prefix":       {paths(config.PathMatch{Prefix: "/v1/exports"}), "GET", "/v1/exports.csv/2026", true},
		"no suffix, longer segment":   {paths(config.PathMatch{Exact: "/v1/exports"}), "GET", "/v1/exportsx", false},
		"suffix on an inner segment":  {paths(config.PathMatch{Exact: "/v1"}), "GET", "/v1.json/x", false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			checks := oneRule(t, c.match).Checks(newRequest(c.method, c.target), nil)
			g.Expect(checks).To(HaveLen(map[bool]int{true: 1, false: 0}[c.want]))
		})
	}
}

func TestExemptRuleExemptsItsPolicyOnly(t *testing.T) {
	table := shop(t)
	cases := map[string]struct {
		req  *request.Request
		want []string
	}{
		"health is exempt from public-api, not from admin": {newRequest("GET", "/healthz"), []string{"admin/all"}},
		"health with a trailing slash is not the exempt path": {newRequest("GET", "/healthz/"),
			[]string{"public-api/api", "admin/all"}},
		"every matching rule applies": {newRequest("GET", "/v1/orders"),
			[]string{"public-api/api", "public-api/plans", "admin/all"}},
		"exports": {newRequest("POST", "/v1/exports/monthly"),
			[]string{"public-api/api", "public-api/plans", "public-api/exports", "admin/all"}},
		"exports by GET": {newRequest("GET", "/v1/exports/monthly"),
			[]string{"public-api/api", "public-api/plans", "admin/all"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(applied(table.Checks(c.req, nil))).To(Equal(c.want))
		})
	}
}

func TestWindowsFollowOverrideThenTierThenLimits(t *testing.T) {
	table := shop(t)
	hour, minute, day := time.Hour, time.Minute, 24*time.Hour
	acme := bearer(`{"tenant_id":"acme"}`)
	globex := bearer(`{"tenant_id":"globex"}`)
	cases := map[string]struct {
		req     *request.Request
		rule    string
		tier    string
		windows []limiter.Window
	}{
		"premium tier": {newRequest("GET", "/v1/orders", "X-API-Key: k1", "X-Plan: premium"), "plans", "premium",
			[]limiter.Window{{Requests: 5000, Period: hour}}},
		"basic tier": {newRequest("GET", "/v1/orders", "X-API-Key: k1", "X-Plan: basic"), "plans", "basic",
			[]limiter.Window{{Requests: 500, Period: hour}}},
		"unknown tier is the default": {newRequest("GET", "/v1/orders", "X-API-Key: k1", "X-Plan: gold"), "plans", "free",
			[]limiter.Window{{Requests: 100, Period: hour}}},
		"no tier is the default": {newRequest("GET", "/v1/orders", "X-API-Key: k1"), "plans", "free",
			[]limiter.Window{{Requests: 100, Period: hour}}},
		"rule without tier limits": {newRequest("GET", "/v1/orders", "X-Plan: premium"), "api", "premium",
			[]limiter.Window{{Requests: 60, Period: minute, Burst: 60}}},
		"overridden tenant": {newRequest("POST", "/v1/exports/monthly", acme, "X-Plan: premium"), "exports", "premium",
			[]limiter.Window{{Requests: 1000, Period: minute}}},
		"override covers every partition": {newRequest("POST", "/v1/exports/yearly", acme), "exports", "free",
			[]limiter.Window{{Requests: 1000, Period: minute}}},
		"other tenant": {newRequest("POST", "/v1/exports/monthly", globex), "exports", "free",
			[]limiter.Window{{Requests: 100, Period: minute}, {Requests: 5000, Period: day}}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var found *Check
			checks := table.Checks(c.req, nil)
			for i := range checks {
				if checks[i].Policy.Name == "public-api" && checks[i].Rule.Name == c.rule {
					found = &checks[i]
				}
			}
			g.Expect(found).NotTo(BeNil(), "rule %s applies", c.rule)
			g.Expect(found.Tier).To(Equal(c.tier))
			g.Expect(found.Request.Windows).To(Equal(c.windows))
		})
	}
}

func TestOverridesForAnonymousRequests(t *testing.T) {
	g := NewWithT(t)
	c := &config.Config{Schema: config.Schema, Namespace: "ns", Policies: []config.Policy{{
		Name: "p", Mode: "Enforce", FailureMode: "Open", ResponseHeaders: "None",
		Timeout: config.Duration{Duration: 50 * time.Millisecond},
		Rules: []config.Rule{{Name: "r", Algorithm: "FixedWindow", Cost: 1,
			Identity:  config.Identity{Sources: []config.Source{{Header: &config.HeaderSource{Name: "X-Tenant-ID"}}}},
			Limits:    []config.Limit{{Requests: 10, Period: config.Duration{Duration: time.Second}}},
			Overrides: []config.Override{{Tenant: "anonymous", Limits: []config.Limit{{Requests: 1, Period: config.Duration{Duration: time.Second}}}}},
		}},
	}}}
	table, err := New(c)
	g.Expect(err).NotTo(HaveOccurred())
	anon := table.Checks(newRequest("GET", "/"), nil)
	g.Expect(anon).To(HaveLen(1))
	g.Expect(anon[0].Request.Windows[0].Requests).To(Equal(int64(1)), `requests no source names are the tenant "anonymous"`)
	named := table.Checks(newRequest("GET", "/", "X-Tenant-ID: acme"), nil)
	g.Expect(named[0].Request.Windows[0].Requests).To(Equal(int64(10)))
	g.Expect(named[0].Request.Bucket.Tenant).NotTo(Equal(anon[0].Request.Bucket.Tenant))
}

func TestCheckCarriesWhatTheLimiterNeeds(t *testing.T) {
	g := NewWithT(t)
	table := shop(t)
	const key = "sk_live_0123456789abcdef"
	checks := table.Checks(newRequest("POST", "/v1/exports/monthly", "X-API-Key: "+key, "X-Tenant-ID: acme", bearer(`{"tenant_id":"acme"}`)), nil)
	g.Expect(applied(checks)).To(Equal([]string{"public-api/api", "public-api/plans", "public-api/exports", "admin/all"}))

	keyHash := sha256.Sum256([]byte(key))
	const salt = "5b0f7a52-3f0e-4d3c-9a51-0c6f1c1f7d10"
	api, plans, exports, all := checks[0], checks[1], checks[2], checks[3]
	g.Expect(api.Request.Bucket).To(Equal(limiter.Bucket{Namespace: "shop", Policy: "public-api", Rule: "api",
		Tenant: limiter.HashTenant(salt, "acme")}))
	g.Expect(plans.Request.Bucket.Tenant).To(Equal(limiter.HashTenant(salt, "sha256:"+hex.EncodeToString(keyHash[:]))))
	g.Expect(exports.Request.Bucket.Tenant).To(Equal(limiter.HashTenant(salt, "acme\x00/v1/exports/monthly")))
	g.Expect(all.Request.Bucket).To(Equal(limiter.Bucket{Namespace: "shop", Policy: "admin", Rule: "all",
		Tenant: limiter.HashTenant("0d1e2f30-1111-4222-8333-944455566677", "\x00shared")}))

	g.Expect(plans.Request.Algorithm).To(Equal(limiter.SlidingWindowCounter))
	g.Expect(plans.Request.Cost).To(Equal(int64(1)))
	g.Expect(plans.Request.Failure).To(Equal(limiter.FailurePolicy{Mode: config.FailOpen, Timeout: 50 * time.Millisecond, Replicas: 3}))
	g.Expect(plans.Policy.DryRun).To(BeFalse())
	g.Expect(all.Request.Algorithm).To(Equal(limiter.FixedWindow))
	g.Expect(all.Request.Cost).To(Equal(int64(2)))
	g.Expect(all.Request.Failure).To(Equal(limiter.FailurePolicy{Mode: config.FailClosed, Timeout: 20 * time.Millisecond, Replicas: 1}))
	g.Expect(all.Policy.DryRun).To(BeTrue())
	g.Expect(all.Policy.RedisURLEnv).To(Equal("SLUICE_REDIS_URL_ADMIN"))
	g.Expect(all.Policy.IETFHeaders).To(BeTrue(), "responseHeaders: IETF")
	g.Expect(all.Policy.XRateLimitHeaders).To(BeFalse())
	g.Expect(all.Tier).To(BeEmpty(), "admin has no tiers")

	for _, c := range checks {
		g.Expect(c.Request.Windows).NotTo(BeEmpty())
		g.Expect(c.Request.Bucket.Tenant).NotTo(BeEmpty())
		g.Expect(fmt.Sprintf("%#v", c)).NotTo(ContainSubstring(key), "the raw API key never reaches a check")
		g.Expect(fmt.Sprintf("%#v", c.Request)).NotTo(ContainSubstring(hex.EncodeToString(keyHash[:])), "only its salted hash reaches the limiter")
		if c.Rule.Name == "plans" {
			g.Expect(c.Tenant).To(Equal("sha256:"+hex.EncodeToString(keyHash[:])), "the tenant as overrides and /debug/tenant name it")
		}
	}
}

func TestRulesSharingAnIdentityShareTheTenant(t *testing.T) {
	g := NewWithT(t)
	id := config.Identity{Sources: []config.Source{{Header: &config.HeaderSource{Name: "X-Tenant-ID"}}}}
	limit := []config.Limit{{Requests: 10, Period: config.Duration{Duration: time.Second}}}
	table, err := New(&config.Config{Schema: config.Schema, Namespace: "ns", Policies: []config.Policy{{
		Name: "p", Mode: "Enforce", FailureMode: "Open", ResponseHeaders: "None", Salt: "s",
		Timeout: config.Duration{Duration: 50 * time.Millisecond},
		Rules: []config.Rule{
			{Name: "a", Algorithm: "FixedWindow", Cost: 1, Identity: id, Limits: limit},
			{Name: "b", Algorithm: "TokenBucket", Cost: 1, Identity: id, Limits: limit},
		},
	}}})
	g.Expect(err).NotTo(HaveOccurred())
	checks := table.Checks(newRequest("GET", "/", "X-Tenant-ID: acme"), nil)
	g.Expect(checks).To(HaveLen(2))
	g.Expect(checks[0].Rule.identity).To(BeIdenticalTo(checks[1].Rule.identity))
	g.Expect(checks[1].Request.Bucket.Tenant).To(Equal(limiter.HashTenant("s", "acme")))
	g.Expect(checks[1].Request.Bucket.Rule).To(Equal("b"))
}

func TestChecksReusesDst(t *testing.T) {
	g := NewWithT(t)
	table := shop(t)
	buf := make([]Check, 0, 8)
	checks := table.Checks(newRequest("GET", "/v1/orders"), buf[:0])
	g.Expect(checks).To(HaveLen(3))
	g.Expect(&checks[0]).To(BeIdenticalTo(&buf[:1][0]))

	var none *Table
	g.Expect(none.Checks(newRequest("GET", "/"), buf[:0])).To(BeEmpty())
	g.Expect(none.Policies()).To(BeEmpty())
}

func TestPolicies(t *testing.T) {
	g := NewWithT(t)
	ps := shop(t).Policies()
	g.Expect(ps).To(HaveLen(2))
	g.Expect(ps[0].Name).To(Equal("public-api"))
	g.Expect(ps[0].UID).To(Equal("5b0f7a52-3f0e-4d3c-9a51-0c6f1c1f7d10"))
	g.Expect(ps[0].Generation).To(Equal(int64(4)))
	g.Expect(ps[0].UpstreamPort).To(Equal(int32(8080)))
	g.Expect(ps[0].Rules).To(HaveLen(4))
	g.Expect(ps[0].Rules[0].Exempt).To(BeTrue())
	g.Expect(ps[1].Name).To(Equal("admin"))
}

func TestNewRefusesAnInvalidConfig(t *testing.T) {
	g := NewWithT(t)
	c, err := config.Load("../config/testdata/shop.json")
	g.Expect(err).NotTo(HaveOccurred())
	c.Policies[0].Rules[1].Identity.Sources[1].ClientIP.TrustedProxies = []string{"10.0.0.0/99"}
	_, err = New(c)
	g.Expect(err).To(MatchError(ContainSubstring(`"10.0.0.0/99" is not a CIDR`)))
}

func TestChecksIsSafeForConcurrentUse(t *testing.T) {
	g := NewWithT(t)
	table := shop(t)
	want := applied(table.Checks(newRequest("POST", "/v1/exports/a", bearer(`{"tenant_id":"acme"}`)), nil))
	results := make(chan []string, 8)
	for range 8 {
		go func() {
			var dst []Check
			var last []string
			for range 200 {
				dst = table.Checks(newRequest("POST", "/v1/exports/a", bearer(`{"tenant_id":"acme"}`)), dst[:0])
				last = applied(dst)
			}
			results <- last
		}()
	}
	for range 8 {
		g.Expect(<-results).To(Equal(want))
	}
}

func TestOverridesNameTenantsAsIdentityResolvesThem(t *testing.T) {
	sources := []config.Source{
		{APIKey: &config.HeaderSource{Name: "X-API-Key"}},
		{ClientIP: &config.ClientIPSource{}},
	}
	keyHash := sha256.Sum256([]byte("sk_live_1"))
	cases := map[string]struct {
		override string
		req      *request.Request
	}{
		"API key hash":               {"sha256:" + hex.EncodeToString(keyHash[:]), newRequest("GET", "/", "X-API-Key: sk_live_1")},
		"API key hash in upper case": {"sha256:" + strings.ToUpper(hex.EncodeToString(keyHash[:])), newRequest("GET", "/", "X-API-Key: sk_live_1")},
		"IPv4":                       {"203.0.113.9", newRequest("GET", "/")},
		"IPv6 as written by a user":  {"2001:DB8:0::7", withRemote(newRequest("GET", "/"), "[2001:db8::7]:443")},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			table, err := New(&config.Config{Schema: config.Schema, Namespace: "ns", Policies: []config.Policy{{
				Name: "p", Mode: "Enforce", FailureMode: "Open", ResponseHeaders: "None",
				Timeout: config.Duration{Duration: 50 * time.Millisecond},
				Rules: []config.Rule{{Name: "r", Algorithm: "FixedWindow", Cost: 1,
					Identity:  config.Identity{Sources: sources},
					Limits:    []config.Limit{{Requests: 10, Period: config.Duration{Duration: time.Second}}},
					Overrides: []config.Override{{Tenant: c.override, Limits: []config.Limit{{Requests: 3, Period: config.Duration{Duration: time.Second}}}}},
				}},
			}}})
			g.Expect(err).NotTo(HaveOccurred())
			checks := table.Checks(c.req, nil)
			g.Expect(checks).To(HaveLen(1))
			g.Expect(checks[0].Request.Windows[0].Requests).To(Equal(int64(3)))
		})
	}
}

func TestManyDistinctIdentitiesInOnePolicy(t *testing.T) {
	g := NewWithT(t)
	p := config.Policy{Name: "p", Mode: "Enforce", FailureMode: "Open", ResponseHeaders: "None", Salt: "s",
		Timeout: config.Duration{Duration: 50 * time.Millisecond}}
	var headers []string
	for i := range 12 {
		name := fmt.Sprintf("X-Tenant-%d", i)
		headers = append(headers, fmt.Sprintf("%s: t%d", name, i))
		p.Rules = append(p.Rules, config.Rule{Name: fmt.Sprintf("r%d", i), Algorithm: "FixedWindow", Cost: 1,
			Identity: config.Identity{Sources: []config.Source{{Header: &config.HeaderSource{Name: name}}}},
			Limits:   []config.Limit{{Requests: 10, Period: config.Duration{Duration: time.Second}}}})
	}
	table, err := New(&config.Config{Schema: config.Schema, Namespace: "ns", Policies: []config.Policy{p}})
	g.Expect(err).NotTo(HaveOccurred())
	checks := table.Checks(newRequest("GET", "/", headers...), nil)
	g.Expect(checks).To(HaveLen(12))
	for i, c := range checks {
		g.Expect(c.Request.Bucket.Tenant).To(Equal(limiter.HashTenant("s", fmt.Sprintf("t%d", i))))
	}
}

// TestTenantCheckIsTheRequestsCheck: /debug/tenant, given what a request's
// identity yields, its tier and its partition, looks at the very bucket,
// tier and windows the request is decided with.
func TestTenantCheckIsTheRequestsCheck(t *testing.T) {
	table := shop(t)
	k1 := sha256.Sum256([]byte("k1"))
	cases := map[string]struct {
		req   *request.Request
		query TenantQuery
	}{
		"override, partitioned": {newRequest("POST", "/v1/exports/monthly", bearer(`{"tenant_id":"acme"}`), "X-Plan: premium"),
			TenantQuery{Policy: "public-api", Rule: "exports", Tenant: "acme", Tier: "premium", Method: "POST", Path: "/v1/exports/monthly", Host: "example.com"}},
		"other tenant, no tier": {newRequest("POST", "/v1/exports/monthly", bearer(`{"tenant_id":"globex"}`)),
			TenantQuery{Policy: "public-api", Rule: "exports", Tenant: "globex", Method: "POST", Path: "/v1/exports/monthly", Host: "example.com"}},
		"unknown tier is the default": {newRequest("GET", "/v1/orders", "X-API-Key: k1", "X-Plan: gold"),
			TenantQuery{Policy: "public-api", Rule: "plans", Tenant: "sha256:" + hex.EncodeToString(k1[:]), Tier: "gold", Method: "GET", Path: "/v1/orders", Host: "example.com"}},
		"client IP": {newRequest("GET", "/v1/orders"),
			TenantQuery{Policy: "public-api", Rule: "api", Tenant: "203.0.113.9", Method: "GET", Path: "/v1/orders", Host: "example.com"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var want *Check
			checks := table.Checks(c.req, nil)
			for i := range checks {
				if checks[i].Policy.Name == c.query.Policy && checks[i].Rule.Name == c.query.Rule {
					want = &checks[i]
				}
			}
			g.Expect(want).NotTo(BeNil())
			got, _, ok := table.TenantCheck(c.query)
			g.Expect(ok).To(BeTrue())
			g.Expect(got.Tier).To(Equal(want.Tier))
			g.Expect(got.Request).To(Equal(want.Request))
		})
	}

	_, _, ok := table.TenantCheck(TenantQuery{Policy: "public-api", Rule: "nope"})
	g := NewWithT(t)
	g.Expect(ok).To(BeFalse())
}

func TestMethodOverrideMatchesEitherMethod(t *testing.T) {
	g := NewWithT(t)
	table := oneRule(t, config.Match{Methods: []string{"DELETE"}})
	r := newRequest("POST", "/v1/orders/7")
	g.Expect(table.Checks(r, nil)).To(BeEmpty())
	r.MethodOverrides = []string{"PUT", "DELETE"} // X-HTTP-Method-Override or _method, as Symfony and Laravel route it
	g.Expect(table.Checks(r, nil)).To(HaveLen(1))
	r.MethodOverrides, r.AnyMethod = nil, true // a multipart form's _method, unread
	g.Expect(table.Checks(r, nil)).To(HaveLen(1))
}

// Exempt rules let exactly what they name through: a case change or a
// suffix is another path, which limited rules still count.
func TestExemptRulesCompareExactly(t *testing.T) {
	table, err := New(&config.Config{Schema: config.Schema, Namespace: "ns", Policies: []config.Policy{{
		Name: "p", Mode: "Enforce", FailureMode: "Open", ResponseHeaders: "None",
		Timeout: config.Duration{Duration: 50 * time.Millisecond},
		Rules: []config.Rule{
			{Name: "health", Exempt: true, Match: config.Match{Paths: []config.PathMatch{{Exact: "/healthz"}}}},
			{Name: "all", Algorithm: "FixedWindow", Cost: 1,
				Identity: config.Identity{Sources: []config.Source{{Shared: &struct{}{}}}},
				Limits:   []config.Limit{{Requests: 10, Period: config.Duration{Duration: time.Second}}}},
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	for target, limited := range map[string]bool{"/healthz": false, "/HEALTHZ": true, "/healthz.json": true, "/Healthz/": true} {
		t.Run(target, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(table.Checks(newRequest("GET", target), nil)).To(HaveLen(map[bool]int{true: 1, false: 0}[limited]))
		})
	}
}
