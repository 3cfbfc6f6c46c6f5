package rls

import (
	"testing"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/rls/erlconfig"
)

// tree is a domain exercising every way of matching.
const tree = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1, name: any-ip}
  - key: remote_address
    value: 10.0.0.1
    rate_limit: {unit: second, requests_per_unit: 2, name: office}
  - key: path
    value: "/v1/*"
    rate_limit: {unit: second, requests_per_unit: 3, name: v1-first}
  - key: path
    value: "/v1/exports*"
    rate_limit: {unit: second, requests_per_unit: 4, name: exports-later}
  - key: path
    value: "*.pdf"
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 5, name: pdf}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 6, name: any-path}
  - key: tenant
    value: acme
    descriptors:
      - key: plan
        rate_limit: {unit: second, requests_per_unit: 7, name: acme-plan}
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 8, name: any-tenant}
    descriptors:
      - key: plan
        value: gold
        rate_limit: {unit: second, requests_per_unit: 9, name: gold}
      - key: plan
        descriptors:
          - key: user
            rate_limit: {unit: second, requests_per_unit: 10, name: user}
  - key: free
    rate_limit: {unlimited: true}
`

func table(t *testing.T, files ...string) *Table {
	t.Helper()
	var parsed []*erlconfig.File
	for _, f := range files {
		p, err := erlconfig.Parse("test.yaml", []byte(f))
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, p)
	}
	cfg, err := erlconfig.Compile(parsed, erlconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// entries writes a descriptor as key, value, key, value...
func entries(kv ...string) []*ratelimitv3common.RateLimitDescriptor_Entry {
	var out []*ratelimitv3common.RateLimitDescriptor_Entry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &ratelimitv3common.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestMostSpecificMatch(t *testing.T) {
	tab := table(t, tree)
	cases := map[string]struct {
		domain  string
		entries []string
		want    string // the limit name, "" for no rule
	}{
		"exact value first":             {"edge", []string{"remote_address", "10.0.0.1"}, "office"},
		"key only for another value":    {"edge", []string{"remote_address", "10.0.0.2"}, "any-ip"},
		"key only for an empty value":   {"edge", []string{"remote_address", ""}, "any-ip"},
		"first wildcard in file order":  {"edge", []string{"path", "/v1/exports/9"}, "v1-first"},
		"wildcard suffix":               {"edge", []string{"path", "/docs/a.pdf"}, "pdf"},
		"wildcard before key only":      {"edge", []string{"path", "/v1/x"}, "v1-first"},
		"key only when no wildcard":     {"edge", []string{"path", "/v2/x"}, "any-path"},
		"unknown key":                   {"edge", []string{"color", "red"}, ""},
		"unknown domain":                {"other", []string{"remote_address", "10.0.0.1"}, ""},
		"nested under exact":            {"edge", []string{"tenant", "acme", "plan", "gold"}, "acme-plan"},
		"exact parent, no way back":     {"edge", []string{"tenant", "acme"}, ""},
		"nested under key only, exact":  {"edge", []string{"tenant", "globex", "plan", "gold"}, "gold"},
		"parent depth":                  {"edge", []string{"tenant", "globex"}, "any-tenant"},
		"three levels":                  {"edge", []string{"tenant", "globex", "plan", "free", "user", "u1"}, "user"},
		"intermediate node has no rule": {"edge", []string{"tenant", "globex", "plan", "free"}, ""},
		"deeper than the tree":          {"edge", []string{"remote_address", "10.0.0.1", "path", "/"}, ""},
		"deeper than a leaf's children": {"edge", []string{"tenant", "acme", "plan", "gold", "user", "u"}, ""},
		"entries in another order":      {"edge", []string{"plan", "gold", "tenant", "acme"}, ""},
		"no entries":                    {"edge", nil, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := tab.Match(tc.domain, entries(tc.entries...))
			if tc.want == "" {
				g.Expect(r).To(BeNil())
				return
			}
			g.Expect(r).NotTo(BeNil())
			g.Expect(r.LimitName).To(Equal(tc.want))
		})
	}
	g := NewWithT(t)
	free := tab.Match("edge", entries("free", "x"))
	g.Expect(free.Unlimited).To(BeTrue())
}

func TestBucketsFollowTheDescriptorsValues(t *testing.T) {
	g := NewWithT(t)
	tab := table(t, tree)
	tenant := func(kv ...string) string {
		e := entries(kv...)
		return string(tab.Match("edge", e).Tenant(e))
	}
	g.Expect(tenant("remote_address", "10.0.0.2")).NotTo(Equal(tenant("remote_address", "10.0.0.3")), "a key-only rule counts each value apart")
	g.Expect(tenant("remote_address", "10.0.0.2")).To(Equal(tenant("remote_address", "10.0.0.2")))
	g.Expect(tenant("path", "/v1/a")).NotTo(Equal(tenant("path", "/v1/b")), "a wildcard counts each value apart")
	g.Expect(tenant("path", "/a.pdf")).To(Equal(tenant("path", "/b.pdf")), "unless it shares its threshold")
	g.Expect(tenant("tenant", "a", "plan", "gold")).NotTo(Equal(tenant("tenant", "b", "plan", "gold")), "every entry's value names the bucket")
}

func TestWildcardMatch(t *testing.T) {
	cases := []struct {
		pattern, value string
		want           bool
	}{
		{"foo*", "foo", true}, {"foo*", "foobar", true}, {"foo*", "fo", false},
		{"*.pdf", "a.pdf", true}, {"*.pdf", "a.pdfx", false},
		{"a*b*c", "abc", true}, {"a*b*c", "a-b-c", true}, {"a*b*c", "acb", false},
		{"ab*ba", "aba", false}, {"*", "", true},
	}
	for _, tc := range cases {
		g := NewWithT(t)
		e := config.DescriptorEntry{Key: "k", Value: tc.pattern}
		n := &node{}
		n.add(&Rule{path: []config.DescriptorEntry{e}, LimitName: "hit"})
		got := n.next("k", tc.value)
		g.Expect(got != nil).To(Equal(tc.want), "%q ~ %q", tc.pattern, tc.value)
	}
}

// An override is built once per table and reused while its rate is the
// same; another rate is another rule, and the table keeps a bounded number.
func TestOverrideRulesAreBuiltOncePerTable(t *testing.T) {
	g := NewWithT(t)
	tab := table(t, tree)
	matched := tab.Match("edge", []*ratelimitv3common.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.2"}})
	g.Expect(matched).NotTo(BeNil())
	override := func(n uint32) *ratelimitv3common.RateLimitDescriptor_RateLimitOverride {
		return &ratelimitv3common.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: typev3.RateLimitUnit_MINUTE}
	}
	a, err := tab.Override("edge", matched, override(5))
	g.Expect(err).NotTo(HaveOccurred())
	b, err := tab.Override("edge", matched, override(5))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b).To(BeIdenticalTo(a), "the same override reuses its rule")
	c, err := tab.Override("edge", matched, override(6))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c).NotTo(BeIdenticalTo(a))
	g.Expect(c.Windows()[0].Requests).To(BeEquivalentTo(6))

	for n := range uint32(2 * maxCachedOverrides) {
		_, err := tab.Override("edge", matched, override(100+n))
		g.Expect(err).NotTo(HaveOccurred())
	}
	kept := 0
	tab.overrides.Range(func(any, any) bool { kept++; return true })
	g.Expect(kept).To(Equal(maxCachedOverrides), "the table keeps a bounded number of override rules")
}
