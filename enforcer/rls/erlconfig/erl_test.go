package erlconfig

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
)

const shop = `
domain: shop
sluice: {failureMode: Closed, timeout: 20ms, replicas: 2}
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 60, name: per-ip}
  - key: remote_address
    value: 10.0.0.1
    rate_limit: {unlimited: true}
  - key: path
    value: "/v1/exports*"
    share_threshold: true
    detailed_metric: true
    rate_limit:
      requests_per_unit: 100
      name: exports
      replaces: [{name: per-ip}]
      sluice: {algorithm: SlidingWindowLog, period: 5m, limits: [{requests: 1000, period: 24h}]}
  - key: tenant
    descriptors:
      - key: plan
        value: gold
        shadow_mode: true
        rate_limit: {unit: Month, requests_per_unit: 5000}
      - key: quiet
`

func TestCompileFollowsTheFile(t *testing.T) {
	g := NewWithT(t)
	f, err := Parse("shop.yaml", []byte(shop))
	g.Expect(err).NotTo(HaveOccurred())
	c, err := Compile([]*File{f}, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Namespace).To(Equal(DefaultNamespace))
	g.Expect(c.Policies).To(HaveLen(1))
	p := c.Policies[0]
	g.Expect(p.Domain).To(Equal("shop"))
	g.Expect(p.FailureMode).To(Equal(config.FailClosed))
	g.Expect(p.Timeout.Duration).To(Equal(20 * time.Millisecond))
	g.Expect(p.Replicas).To(Equal(int32(2)))
	g.Expect(p.Salt).To(Equal("erl:shop"), "the same salt on every instance, so they share buckets")

	names := []string{}
	for _, r := range p.Rules {
		names = append(names, r.Name)
	}
	g.Expect(names).To(Equal([]string{"remote_address", "remote_address_10.0.0.1", "path_%2Fv1%2Fexports*", "tenant.plan_gold", "tenant.quiet"}))

	perIP := p.Rules[0]
	g.Expect(perIP.Algorithm).To(Equal(config.FixedWindow), "without sluice settings, envoyproxy/ratelimit's fixed windows")
	g.Expect(perIP.Limits).To(Equal([]config.Limit{{Requests: 60, Period: config.Duration{Duration: time.Minute}}}))
	g.Expect(perIP.LimitName).To(Equal("per-ip"))
	g.Expect(perIP.Match.Descriptor).To(Equal([]config.DescriptorEntry{{Key: "remote_address"}}))
	g.Expect(perIP.Identity.Sources[0].Kind()).To(Equal(config.SourceDescriptor))

	g.Expect(p.Rules[1].Exempt).To(BeTrue(), "unlimited")

	exports := p.Rules[2]
	g.Expect(exports.Algorithm).To(Equal(config.SlidingWindowLog))
	g.Expect(exports.Limits).To(Equal([]config.Limit{
		{Requests: 100, Period: config.Duration{Duration: 5 * time.Minute}},
		{Requests: 1000, Period: config.Duration{Duration: 24 * time.Hour}},
	}))
	g.Expect(exports.Replaces).To(Equal([]string{"per-ip"}))
	g.Expect(exports.Match.Descriptor).To(Equal([]config.DescriptorEntry{{Key: "path", Value: "/v1/exports*", Shared: true}}))

	gold := p.Rules[3]
	g.Expect(gold.Shadow).To(BeTrue())
	g.Expect(gold.Limits[0].Period.Duration).To(Equal(30*24*time.Hour), "a month is 30 days, as envoyproxy/ratelimit counts it")
	g.Expect(gold.Match.Descriptor).To(Equal([]config.DescriptorEntry{{Key: "tenant"}, {Key: "plan", Value: "gold"}}))

	quiet := p.Rules[4]
	g.Expect(quiet.Exempt).To(BeTrue(), "a node with no limit at or below it still ends the walk that reaches it")
}

func TestTheServicesFailureModeAndTimeoutAreTheDefaults(t *testing.T) {
	g := NewWithT(t)
	plain, err := Parse("plain.yaml", []byte("domain: plain\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 3}}]"))
	g.Expect(err).NotTo(HaveOccurred())
	own, err := Parse("shop.yaml", []byte(shop))
	g.Expect(err).NotTo(HaveOccurred())
	c, err := Compile([]*File{plain}, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Policies[0].FailureMode).To(Equal(config.FailOpen), "without either, Open")
	g.Expect(c.Policies[0].Timeout.Duration).To(Equal(DefaultTimeout))
	c, err = Compile([]*File{plain, own}, Options{FailureMode: config.FailLocal, Timeout: time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Policies[0].FailureMode).To(Equal(config.FailLocal), "the service's default")
	g.Expect(c.Policies[0].Timeout.Duration).To(Equal(time.Second))
	g.Expect(c.Policies[1].FailureMode).To(Equal(config.FailClosed), "a file's own setting wins")
	g.Expect(c.Policies[1].Timeout.Duration).To(Equal(20*time.Millisecond), "a file's own setting wins")
}

func TestUnitsAreEnvoyRatelimits(t *testing.T) {
	g := NewWithT(t)
	for unit, want := range map[string]time.Duration{
		"second": time.Second, "MINUTE": time.Minute, "hour": time.Hour, "day": 24 * time.Hour,
		"week": 7 * 24 * time.Hour, "month": 30 * 24 * time.Hour, "year": 365 * 24 * time.Hour,
	} {
		f, err := Parse("u.yaml", []byte("domain: d\ndescriptors: [{key: k, rate_limit: {unit: "+unit+", requests_per_unit: 3}}]"))
		g.Expect(err).NotTo(HaveOccurred(), unit)
		c, err := Compile([]*File{f}, Options{})
		g.Expect(err).NotTo(HaveOccurred(), unit)
		g.Expect(c.Policies[0].Rules[0].Limits[0].Period.Duration).To(Equal(want), unit)
	}
}

func TestBadFilesAreRefusedWithFileAndField(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"unknown key":      {"domain: d\ndescriptors: [{key: k, rate_limt: {}}]", "bad.yaml: descriptors[0].rate_limt (line 2): unknown field"},
		"no domain":        {"descriptors: [{key: k}]", "bad.yaml: domain (line 1): must not be empty"},
		"empty key":        {"domain: d\ndescriptors: [{value: v}]", "descriptors[0].key (line 2): must not be empty"},
		"bad unit":         {"domain: d\ndescriptors: [{key: k, rate_limit: {unit: fortnight, requests_per_unit: 1}}]", `descriptors[0].rate_limit.unit (line 2): invalid rate limit unit "fortnight"`},
		"no unit":          {"domain: d\ndescriptors: [{key: k, rate_limit: {requests_per_unit: 1}}]", "descriptors[0].rate_limit.unit (line 2): must be one of second"},
		"unlimited + unit": {"domain: d\ndescriptors: [{key: k, rate_limit: {unlimited: true, unit: second}}]", "an unlimited rate limit has no unit"},
		"zero requests":    {"domain: d\ndescriptors: [{key: k, rate_limit: {unit: second}}]", "descriptors[0].rate_limit.requests_per_unit (line 2): must be at least 1"},
		"wrong type":       {"domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: many}}]", "descriptors[0].rate_limit.requests_per_unit (line 2): cannot unmarshal"},
		"duplicate":        {"domain: d\ndescriptors: [{key: k, value: v}, {key: k, value: v}]", `descriptors[1] (line 2): the same descriptor ("k_v") as descriptors[0]`},
		"nested duplicate": {"domain: d\ndescriptors:\n- key: a\n  descriptors: [{key: k}, {key: k}]", `descriptors[0].descriptors[1] (line 4): the same descriptor ("k")`},
		"replaces itself":  {"domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1, name: n, replaces: [{name: n}]}}]", "descriptors[0].rate_limit.replaces[0].name (line 2): a rate limit cannot replace itself"},
		"empty replaces":   {"domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1, replaces: [{}]}}]", "replaces[0].name (line 2): must not be empty"},
		"share no wildcard": {"domain: d\ndescriptors: [{key: k, value: v, share_threshold: true}]",
			`descriptors[0].share_threshold (line 2): only a wildcard value`},
		"quota mode": {"domain: d\ndescriptors: [{key: k, quota_mode: true}]", "descriptors[0].quota_mode (line 2): quota mode is not supported"},
		"bad algorithm": {"domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1, sluice: {algorithm: Leaky}}}]",
			`descriptors[0].rate_limit.sluice.algorithm (line 2): "Leaky" is not one of TokenBucket`},
		"unit and period": {"domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1, sluice: {period: 5m}}}]",
			"give a unit or sluice.period, not both"},
		"bad period": {"domain: d\ndescriptors: [{key: k, rate_limit: {requests_per_unit: 1, sluice: {period: soon}}}]",
			`descriptors[0].rate_limit.sluice.period (line 2): "soon" is not a duration`},
		"same period twice": {"domain: d\ndescriptors: [{key: k, rate_limit: {unit: minute, requests_per_unit: 1, sluice: {limits: [{requests: 5, period: 60s}]}}}]",
			"descriptors[0].rate_limit.sluice.limits[0].period (line 2): 1m0s is the period of another window"},
		"bad failure mode": {"domain: d\nsluice: {failureMode: Maybe}\ndescriptors: []", `sluice.failureMode (line 2): "Maybe" is not one of Open, Closed, LocalFallback`},
		"not yaml":         {"domain: [", "bad.yaml: yaml:"},
		"key twice":        {"domain: d\ndomain: e\n", "bad.yaml: domain (line 2): given twice"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

// TestErrorsNameTheLineOfTheirKey writes a file as people do, a key a
// line: every problem is reported at the line of the key it is about, not
// at the line of the descriptor or mapping holding it.
func TestErrorsNameTheLineOfTheirKey(t *testing.T) {
	g := NewWithT(t)
	_, err := Parse("bad.yaml", []byte(`domain: d
sluice:
  replicas: 2
  timeout: 5s
descriptors:
  - key: user
    rate_limt: {}
  - key: path
    shadow_mode: true
    rate_limit:
      requests_per_unit: 0
      unit: fortnight
      sluice:
        burst: 1
        algorithm: Leaky
        limits:
          - requests: 5
            period: 1h
  - value: v
    key: ""
    quota_mode: true
`))
	g.Expect(err).To(HaveOccurred())
	for _, want := range []string{
		"sluice.timeout (line 4): must be between 1ms and 1s",
		"descriptors[0].rate_limt (line 7): unknown field",
		"descriptors[1].rate_limit.unit (line 12): invalid rate limit unit",
		`descriptors[1].rate_limit.sluice.algorithm (line 15): "Leaky" is not one of`,
		"descriptors[2].key (line 20): must not be empty",
		"descriptors[2].quota_mode (line 21): quota mode is not supported",
	} {
		g.Expect(err.Error()).To(ContainSubstring(want))
	}
}

func TestLoadDir(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	write := func(name, content string) {
		g.Expect(os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)).To(Succeed())
	}
	write("shop.yaml", shop)
	write("sub/mail.yaml", "domain: mail\ndescriptors: [{key: to, rate_limit: {unit: hour, requests_per_unit: 10}}]")
	// a ConfigMap volume's own copies, and a dot file when asked to skip them
	write("..2026_01_01/shop.yaml", shop)
	write(".swp", "not yaml: [")

	_, err := LoadDir(dir, LoadOptions{})
	g.Expect(err).To(MatchError(ContainSubstring(filepath.Join(dir, ".swp")+": yaml:")), "envoyproxy/ratelimit reads dot files unless told not to")

	c, err := LoadDir(dir, LoadOptions{IgnoreDotFiles: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Policies).To(HaveLen(2))
	g.Expect(c.Policies[0].Domain).To(Equal("shop"))
	g.Expect(c.Policies[1].Domain).To(Equal("mail"))

	write("more.yaml", "domain: shop\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 10}}]")
	_, err = LoadDir(dir, LoadOptions{IgnoreDotFiles: true})
	g.Expect(err).To(MatchError(ContainSubstring(`shop.yaml: domain: "shop" is also the domain of ` + filepath.Join(dir, "more.yaml"))))

	c, err = LoadDir(dir, LoadOptions{IgnoreDotFiles: true, Options: Options{MergeDomains: true}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Policies).To(HaveLen(2))
	g.Expect(c.Policies[0].Rules).To(HaveLen(6), "merged: more.yaml sorts before shop.yaml, and brings one rule")

	write("more.yaml", "domain: shop\ndescriptors: [{key: remote_address, rate_limit: {unit: hour, requests_per_unit: 10}}]")
	_, err = LoadDir(dir, LoadOptions{IgnoreDotFiles: true, Options: Options{MergeDomains: true}})
	g.Expect(err).To(MatchError(ContainSubstring(`shop.yaml: descriptors[0]: descriptor "remote_address" of domain "shop" is also in another file`)))

	_, err = LoadDir(filepath.Join(dir, "missing"), LoadOptions{})
	g.Expect(err).To(MatchError(ContainSubstring("no such file or directory")))
	g.Expect(RuntimeDir("/srv/runtime_data/current", "ratelimit", "")).To(Equal("/srv/runtime_data/current/ratelimit/config"))
}
