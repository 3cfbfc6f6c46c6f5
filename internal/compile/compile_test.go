/*
Copyright 2026 The Sluice Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package compile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

const ns = "shop"

// samples reads every policy of config/samples, as kubectl would create them
// in namespace shop.
func samples(t *testing.T) map[string]v1alpha1.RateLimitPolicy {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "ratelimitpolicy_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	out := map[string]v1alpha1.RateLimitPolicy{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var p v1alpha1.RateLimitPolicy
		if err := yaml.UnmarshalStrict(data, &p); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		p.Namespace = ns
		p.UID = types.UID("uid-" + p.Name)
		p.Generation = 1
		out[p.Name] = p
	}
	return out
}

func sample(t *testing.T, name string) v1alpha1.RateLimitPolicy {
	t.Helper()
	p, ok := samples(t)[name]
	if !ok {
		t.Fatalf("no sample policy %s", name)
	}
	return p
}

func compiledRule(g *WithT, p config.Policy, name string) config.Rule {
	i := slices.IndexFunc(p.Rules, func(r config.Rule) bool { return r.Name == name })
	g.Expect(i).NotTo(Equal(-1), "rule %s", name)
	return p.Rules[i]
}

func window(requests int64, period time.Duration) config.Limit {
	return config.Limit{Requests: requests, Period: config.Duration{Duration: period}}
}

func TestEverySampleCompilesAndValidates(t *testing.T) {
	all := samples(t)
	for name, p := range all {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			res, err := Namespace(ns, []v1alpha1.RateLimitPolicy{p}, Options{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Errors).To(BeEmpty())
			g.Expect(res.Config.Validate()).To(Succeed())
			parsed, err := config.Parse(res.JSON)
			g.Expect(err).NotTo(HaveOccurred(), "the enforcer reads what the compiler writes")
			g.Expect(parsed.Policies).To(HaveLen(1))
			g.Expect(parsed.Hash()).To(Equal(res.Hash))
		})
	}
	t.Run("all in one namespace", func(t *testing.T) {
		g := NewWithT(t)
		var list []v1alpha1.RateLimitPolicy
		for _, p := range all {
			list = append(list, p)
		}
		res, err := Namespace(ns, list, Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Errors).To(BeEmpty())
		_, err = config.Parse(res.JSON)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Config.Policies).To(HaveLen(len(all)))
	})
}

func TestPolicyFieldsAndDefaults(t *testing.T) {
	g := NewWithT(t)
	p := sample(t, "public-api")
	compiled, err := Policy(&p, Options{Replicas: map[string]int32{"public-api": 3, "other": 9}})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(compiled.Name).To(Equal("public-api"))
	g.Expect(compiled.UID).To(Equal("uid-public-api"))
	g.Expect(compiled.Salt).To(Equal("uid-public-api"), "the UID salts tenant hashes")
	g.Expect(compiled.Generation).To(BeEquivalentTo(1))
	g.Expect(compiled.Replicas).To(BeEquivalentTo(3))
	g.Expect(compiled.UpstreamPort).To(BeEquivalentTo(8080))
	g.Expect(compiled.UpstreamProtocol).To(Equal(config.UpstreamHTTP1))
	g.Expect(compiled.Selector.MatchLabels).To(HaveKeyWithValue("app.kubernetes.io/name", "public-api"))
	g.Expect(compiled.Mode).To(Equal(config.ModeEnforce))
	g.Expect(compiled.FailureMode).To(Equal(config.FailOpen))
	g.Expect(compiled.Timeout.Duration).To(Equal(50 * time.Millisecond))
	g.Expect(compiled.ResponseHeaders).To(Equal(config.HeadersBoth))
	g.Expect(compiled.RedisURLEnv).To(BeEmpty(), "no storage: the operator's default Redis")
	g.Expect(compiled.Tiers).To(BeNil())

	api := compiledRule(g, compiled, "api")
	g.Expect(api.Algorithm).To(Equal(config.TokenBucket))
	g.Expect(api.Cost).To(BeEquivalentTo(1))
	g.Expect(api.Leasing).To(BeEmpty(), "leasing Auto is the wire format's default, left out")
	g.Expect(api.Limits).To(Equal([]config.Limit{{Requests: 60, Period: config.Duration{Duration: time.Minute}, Burst: 60}}))
	g.Expect(api.TierLimits).To(BeNil())
}

func TestLeasingOffReachesTheConfig(t *testing.T) {
	g := NewWithT(t)
	p := sample(t, "public-api")
	for i := range p.Spec.Rules {
		p.Spec.Rules[i].Leasing = v1alpha1.LeasingOff
	}
	compiled, err := Policy(&p, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(compiledRule(g, compiled, "api").Leasing).To(Equal(config.LeasingOff))
}

func TestUpstreamProtocol(t *testing.T) {
	tests := []struct {
		name string
		spec v1alpha1.UpstreamProtocol
		want config.UpstreamProtocol
	}{
		{"unset is written as HTTP1", "", config.UpstreamHTTP1},
		{"HTTP1", v1alpha1.UpstreamProtocolHTTP1, config.UpstreamHTTP1},
		{"H2C for gRPC servers", v1alpha1.UpstreamProtocolH2C, config.UpstreamH2C},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := sample(t, "public-api")
			p.Spec.UpstreamProtocol = tt.spec
			res, err := Namespace(ns, []v1alpha1.RateLimitPolicy{p}, Options{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Errors).To(BeEmpty())
			g.Expect(string(res.JSON)).To(ContainSubstring(`"upstreamProtocol":"`+string(tt.want)+`"`),
				"the configuration names the protocol, even the default")
			parsed, err := config.Parse(res.JSON)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(parsed.Policies[0].UpstreamProtocol).To(Equal(tt.want))
		})
	}
}

func TestGRPCMatch(t *testing.T) {
	tests := []struct {
		name  string
		match v1alpha1.RequestMatch
		want  config.Match
	}{{
		name:  "a method is its exact path",
		match: v1alpha1.RequestMatch{GRPC: []v1alpha1.GRPCMatch{{Service: "shop.v1.Orders", Method: "Create"}}},
		want:  config.Match{Paths: []config.PathMatch{{Exact: "/shop.v1.Orders/Create"}}},
	}, {
		name:  "a service without a method is the prefix of all its methods",
		match: v1alpha1.RequestMatch{GRPC: []v1alpha1.GRPCMatch{{Service: "shop.v1.Orders"}}},
		want:  config.Match{Paths: []config.PathMatch{{Prefix: "/shop.v1.Orders/"}}},
	}, {
		name:  "a service without a package",
		match: v1alpha1.RequestMatch{GRPC: []v1alpha1.GRPCMatch{{Service: "Greeter", Method: "SayHello"}}},
		want:  config.Match{Paths: []config.PathMatch{{Exact: "/Greeter/SayHello"}}},
	}, {
		name: "paths and grpc entries are one list, paths first; hosts and methods still apply",
		match: v1alpha1.RequestMatch{
			Hosts:   []string{"api.example.com"},
			Methods: []v1alpha1.HTTPMethod{"POST"},
			Paths:   []v1alpha1.PathMatch{{Prefix: "/v1/orders"}},
			GRPC:    []v1alpha1.GRPCMatch{{Service: "shop.v1.Orders", Method: "Create"}, {Service: "shop.v1.Carts"}},
		},
		want: config.Match{
			Hosts:   []string{"api.example.com"},
			Methods: []string{"POST"},
			Paths:   []config.PathMatch{{Prefix: "/v1/orders"}, {Exact: "/shop.v1.Orders/Create"}, {Prefix: "/shop.v1.Carts/"}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := sample(t, "public-api")
			p.Spec.Rules = []v1alpha1.Rule{
				{Name: "health", Exempt: true, Match: &v1alpha1.RequestMatch{GRPC: []v1alpha1.GRPCMatch{{Service: "grpc.health.v1.Health"}}}},
				{Name: "orders", Match: &tt.match, Limits: []v1alpha1.Limit{{Requests: 10, Period: metav1.Duration{Duration: time.Second}}}},
			}
			res, err := Namespace(ns, []v1alpha1.RateLimitPolicy{p}, Options{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Errors).To(BeEmpty())
			parsed, err := config.Parse(res.JSON)
			g.Expect(err).NotTo(HaveOccurred(), "the enforcer reads gRPC matches as the path matches they are")
			g.Expect(compiledRule(g, parsed.Policies[0], "orders").Match).To(Equal(tt.want))
			g.Expect(compiledRule(g, parsed.Policies[0], "health").Match.Paths).To(Equal([]config.PathMatch{{Prefix: "/grpc.health.v1.Health/"}}))
		})
	}
}

func TestDefaultFailureMode(t *testing.T) {
	p := sample(t, "public-api")
	tests := []struct {
		name     string
		spec     v1alpha1.FailureMode
		operator v1alpha1.FailureMode
		want     config.FailureMode
	}{
		{"spec wins", v1alpha1.FailureModeClosed, v1alpha1.FailureModeLocalFallback, "Closed"},
		{"operator default when the spec has none", "", v1alpha1.FailureModeLocalFallback, "LocalFallback"},
		{"API default when neither has one", "", "", "Open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p.Spec.FailureMode = tt.spec
			compiled, err := Policy(&p, Options{DefaultFailureMode: tt.operator})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(compiled.FailureMode).To(Equal(tt.want))
		})
	}
}

func TestTierResolution(t *testing.T) {
	hour := time.Hour
	free, basic, premium := window(100, hour), window(500, hour), window(5000, hour)
	everyone := window(1000, hour)
	tierLimit := func(tier string, requests int64) v1alpha1.Limit {
		return v1alpha1.Limit{Tier: tier, Requests: requests, Period: metav1.Duration{Duration: hour}}
	}

	tests := []struct {
		name       string
		limits     []v1alpha1.Limit
		wantLimits []config.Limit
		wantTiers  map[string][]config.Limit
	}{{
		name:       "every tier named",
		limits:     []v1alpha1.Limit{tierLimit("free", 100), tierLimit("basic", 500), tierLimit("premium", 5000)},
		wantLimits: []config.Limit{free},
		wantTiers:  map[string][]config.Limit{"free": {free}, "basic": {basic}, "premium": {premium}},
	}, {
		name:       "untiered limits for the tiers a rule does not name",
		limits:     []v1alpha1.Limit{tierLimit("", 1000), tierLimit("premium", 5000)},
		wantLimits: []config.Limit{everyone},
		wantTiers:  map[string][]config.Limit{"free": {everyone}, "basic": {everyone}, "premium": {premium}},
	}, {
		name:       "default tier for the tiers a rule does not name",
		limits:     []v1alpha1.Limit{tierLimit("free", 100), tierLimit("premium", 5000)},
		wantLimits: []config.Limit{free},
		wantTiers:  map[string][]config.Limit{"free": {free}, "basic": {free}, "premium": {premium}},
	}, {
		name:       "untiered rule in a tiered policy",
		limits:     []v1alpha1.Limit{tierLimit("", 1000)},
		wantLimits: []config.Limit{everyone},
		wantTiers:  map[string][]config.Limit{"free": {everyone}, "basic": {everyone}, "premium": {everyone}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := sample(t, "plans")
			// A second rule names basic and premium, so every rule resolves them.
			p.Spec.Rules = append(p.Spec.Rules, v1alpha1.Rule{Name: "probe", Limits: tt.limits})
			compiled, err := Policy(&p, Options{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(compiled.Tiers).To(Equal(&config.Tiers{Source: config.Source{Header: &config.HeaderSource{Name: "X-Plan"}}, Default: "free"}))
			probe := compiledRule(g, compiled, "probe")
			g.Expect(probe.Limits).To(Equal(tt.wantLimits))
			g.Expect(probe.TierLimits).To(Equal(tt.wantTiers))
		})
	}

	t.Run("default tier no limit names", func(t *testing.T) {
		g := NewWithT(t)
		p := sample(t, "plans")
		p.Spec.Tiers.Default = "trial"
		p.Spec.Rules[0].Limits = append(p.Spec.Rules[0].Limits, tierLimit("", 10))
		compiled, err := Policy(&p, Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(compiledRule(g, compiled, "plans").TierLimits).To(HaveKeyWithValue("trial", []config.Limit{window(10, hour)}))
	})
}

func TestRuleIdentity(t *testing.T) {
	tenantHeader := config.Source{Header: &config.HeaderSource{Name: "X-Tenant-ID"}}
	clientIP := config.Source{ClientIP: &config.ClientIPSource{}}
	own := &v1alpha1.Identity{Sources: []v1alpha1.IdentitySource{{Shared: &v1alpha1.SharedSource{}}}}

	tests := []struct {
		name           string
		policyIdentity *v1alpha1.Identity
		ruleIdentity   *v1alpha1.Identity
		want           config.Identity
	}{
		{"the policy's", &v1alpha1.Identity{
			Sources:     []v1alpha1.IdentitySource{{Header: &v1alpha1.HeaderSource{Name: "X-Tenant-ID"}}, {ClientIP: &v1alpha1.ClientIPSource{}}},
			PartitionBy: []v1alpha1.PartitionKey{v1alpha1.PartitionByPath},
		}, nil, config.Identity{Sources: []config.Source{tenantHeader, clientIP}, PartitionBy: []config.PartitionKey{config.PartitionByPath}}},
		{"the rule's own, as a whole", &v1alpha1.Identity{
			Sources:     []v1alpha1.IdentitySource{{Header: &v1alpha1.HeaderSource{Name: "X-Tenant-ID"}}},
			PartitionBy: []v1alpha1.PartitionKey{v1alpha1.PartitionByPath},
		}, own, config.Identity{Sources: []config.Source{{Shared: &struct{}{}}}}},
		{"client IP when neither has one", nil, nil, config.Identity{Sources: []config.Source{clientIP}}},
		{"defaults of the sources", &v1alpha1.Identity{Sources: []v1alpha1.IdentitySource{
			{APIKey: &v1alpha1.APIKeySource{}}, {JWTClaim: &v1alpha1.JWTClaimSource{Claim: "sub", Verify: ptr.To(false)}}, {Shared: &v1alpha1.SharedSource{}},
		}}, nil, config.Identity{Sources: []config.Source{
			{APIKey: &config.HeaderSource{Name: "X-API-Key"}},
			{JWTClaim: &config.JWTClaimSource{Claim: "sub", Header: "Authorization"}},
			{Shared: &struct{}{}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := sample(t, "public-api")
			p.Spec.Identity = tt.policyIdentity
			p.Spec.Rules[0].Identity = tt.ruleIdentity
			compiled, err := Policy(&p, Options{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(compiledRule(g, compiled, "api").Identity).To(Equal(tt.want))
		})
	}
}

func TestOverrides(t *testing.T) {
	g := NewWithT(t)
	p := sample(t, "exports")
	p.Spec.Rules = append(p.Spec.Rules, v1alpha1.Rule{
		Name:   "reads",
		Limits: []v1alpha1.Limit{{Requests: 10, Period: metav1.Duration{Duration: time.Second}}},
	})
	compiled, err := Policy(&p, Options{})
	g.Expect(err).NotTo(HaveOccurred())

	exports := compiledRule(g, compiled, "exports")
	g.Expect(exports.Limits).To(Equal([]config.Limit{window(100, time.Minute), window(5000, 24*time.Hour)}))
	g.Expect(exports.Overrides).To(Equal([]config.Override{{
		Tenant: "acme",
		Limits: []config.Limit{window(1000, time.Minute), window(50000, 24*time.Hour)},
	}}), "the raw tenant: the enforcer hashes it like a request's")
	g.Expect(compiledRule(g, compiled, "reads").Overrides).To(BeEmpty(), "overrides stay on the rule they name")
}

func TestExemptRules(t *testing.T) {
	g := NewWithT(t)
	p := sample(t, "web")
	compiled, err := Policy(&p, Options{})
	g.Expect(err).NotTo(HaveOccurred())

	probes := compiledRule(g, compiled, "probes")
	g.Expect(probes.Exempt).To(BeTrue())
	g.Expect(probes.Algorithm).To(BeEmpty())
	g.Expect(probes.Cost).To(BeZero())
	g.Expect(probes.Limits).To(BeEmpty())
	g.Expect(probes.Match.Methods).To(Equal([]string{"GET", "HEAD"}))
	g.Expect(probes.Match.Paths).To(Equal([]config.PathMatch{{Exact: "/healthz"}, {Exact: "/readyz"}, {Prefix: "/metrics"}}))

	web := compiledRule(g, compiled, "web")
	g.Expect(web.Exempt).To(BeFalse())
	g.Expect(web.Algorithm).To(Equal(config.FixedWindow))
	g.Expect(web.Match).To(Equal(config.Match{}), "a rule without match matches every request")
}

func TestDeterministic(t *testing.T) {
	g := NewWithT(t)
	all := samples(t)
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	slices.Sort(names)
	inOrder := func(order []string) []v1alpha1.RateLimitPolicy {
		var list []v1alpha1.RateLimitPolicy
		for _, name := range order {
			list = append(list, all[name])
		}
		return list
	}
	opts := Options{Replicas: map[string]int32{"plans": 2, "web": 5}}
	first, err := Namespace(ns, inOrder(names), opts)
	g.Expect(err).NotTo(HaveOccurred())

	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	// Every other name, then the rest: a third order, whatever the samples.
	var interleaved []string
	for start := range 2 {
		for i := start; i < len(names); i += 2 {
			interleaved = append(interleaved, names[i])
		}
	}
	for _, order := range [][]string{names, reversed, interleaved} {
		again, err := Namespace(ns, inOrder(order), opts)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(again.JSON)).To(Equal(string(first.JSON)))
		g.Expect(again.Hash).To(Equal(first.Hash))
	}
	g.Expect(first.Config.Policies).To(HaveEach(HaveField("Name", BeElementOf(names))))
	compiledNames := []string{}
	for _, p := range first.Config.Policies {
		compiledNames = append(compiledNames, p.Name)
	}
	g.Expect(compiledNames).To(Equal(names), "policies sorted by name")

	opts.Replicas["web"] = 6
	changed, err := Namespace(ns, inOrder(names), opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed.Hash).NotTo(Equal(first.Hash), "a new pod count is a new configuration")
}

func TestStorage(t *testing.T) {
	withStorage := func(name, secret, key string) v1alpha1.RateLimitPolicy {
		p := sample(t, "login")
		p.Name = name
		p.UID = types.UID("uid-" + name)
		p.Spec.Storage = &v1alpha1.Storage{SecretRef: &v1alpha1.SecretKeyReference{Name: secret, Key: key}}
		return p
	}
	tests := []struct {
		name    string
		secrets map[string][]string
		reason  string
		message string
	}{
		{"secret present", map[string][]string{"redis": {"url", "password"}}, "", ""},
		{"secret missing", nil, v1alpha1.ReasonStorageSecretMissing, "Secret redis named in spec.storage.secretRef does not exist in namespace shop: create it with the Redis URL under key url"},
		{"key missing", map[string][]string{"redis": {"password"}}, v1alpha1.ReasonStorageSecretMissing, "Secret redis has no key url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			policies := []v1alpha1.RateLimitPolicy{withStorage("login", "redis", ""), sample(t, "web")}
			res, err := Namespace(ns, policies, Options{Secrets: tt.secrets})
			g.Expect(err).NotTo(HaveOccurred())
			_, webPublished := res.Published("web")
			g.Expect(webPublished).To(BeTrue(), "one policy's error does not hold back the others")
			_, loginPublished := res.Published("login")
			if tt.reason == "" {
				g.Expect(res.Errors).To(BeEmpty())
				g.Expect(loginPublished).To(BeTrue())
				g.Expect(res.Config.Policies[0].RedisURLEnv).To(Equal("SLUICE_REDIS_URL_LOGIN"))
				return
			}
			g.Expect(loginPublished).To(BeFalse())
			g.Expect(res.Errors).To(HaveKey("login"))
			g.Expect(res.Errors["login"].Reason).To(Equal(tt.reason))
			g.Expect(res.Errors["login"].Message).To(ContainSubstring(tt.message))
		})
	}
}

func TestRedisURLEnv(t *testing.T) {
	tests := []struct{ policy, want string }{
		{"login", "SLUICE_REDIS_URL_LOGIN"},
		{"public-api", "SLUICE_REDIS_URL_PUBLIC_API"},
		{"v2", "SLUICE_REDIS_URL_V2"},
		{"api.v1", "SLUICE_REDIS_URL_API_V1_" + RedisURLEnv("api.v1")[len("SLUICE_REDIS_URL_API_V1_"):]},
	}
	for _, tt := range tests {
		g := NewWithT(t)
		g.Expect(RedisURLEnv(tt.policy)).To(Equal(tt.want))
		g.Expect(RedisURLEnv(tt.policy)).To(MatchRegexp(`^[A-Z_][A-Z0-9_]*$`), "a valid environment variable name")
	}
	g := NewWithT(t)
	g.Expect(RedisURLEnv("api.v1")).To(MatchRegexp(`^SLUICE_REDIS_URL_API_V1_[0-9A-F]{8}$`))
	g.Expect(RedisURLEnv("api.v1")).NotTo(Equal(RedisURLEnv("api-v1")), "dotted names do not collide with dashed ones")

	t.Run("a collision in one namespace is the later policy's error", func(t *testing.T) {
		g := NewWithT(t)
		a := sample(t, "login")
		a.Spec.Storage = &v1alpha1.Storage{SecretRef: &v1alpha1.SecretKeyReference{Name: "redis"}}
		b := a
		b.Name, b.UID = strings.TrimPrefix(RedisURLEnv("api.v1"), "SLUICE_REDIS_URL_"), "uid-b"
		b.Name = strings.ToLower(strings.ReplaceAll(b.Name, "_", "-"))
		a.Name = "api.v1"
		res, err := Namespace(ns, []v1alpha1.RateLimitPolicy{a, b}, Options{Secrets: map[string][]string{"redis": {"url"}}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Errors).To(HaveLen(1))
		g.Expect(res.Errors).To(HaveKey("api.v1"), "%s sorts first and keeps the variable", b.Name)
		g.Expect(res.Errors["api.v1"].Message).To(ContainSubstring("rename one of the two policies"))
	})
}

func TestInvalidPolicyKeepsItsLastPublishedEntry(t *testing.T) {
	g := NewWithT(t)
	web := sample(t, "web")
	login := sample(t, "login")
	before, err := Namespace(ns, []v1alpha1.RateLimitPolicy{web, login}, Options{Replicas: map[string]int32{"login": 1}})
	g.Expect(err).NotTo(HaveOccurred())

	// Something the CRD cannot see: a non-exempt rule without limits.
	broken := login.DeepCopy()
	broken.Generation = 2
	broken.Spec.Rules[0].Limits = nil
	after, err := Namespace(ns, []v1alpha1.RateLimitPolicy{web, *broken}, Options{Previous: before.Config, Replicas: map[string]int32{"login": 4}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Errors).To(HaveKey("login"))
	g.Expect(after.Errors["login"].Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
	g.Expect(after.Errors["login"].Message).To(ContainSubstring("spec.rules[0](login).limits: a rule needs 1 to"))
	generation, ok := after.Published("login")
	g.Expect(ok).To(BeTrue())
	g.Expect(generation).To(BeEquivalentTo(1), "the enforcers keep the last generation that compiled")
	g.Expect(after.Config.Policies[0].Replicas).To(BeEquivalentTo(4), "with the current pod count")
	g.Expect(after.Config.Validate()).To(Succeed())

	recreated := broken.DeepCopy()
	recreated.UID = "another-object"
	fresh, err := Namespace(ns, []v1alpha1.RateLimitPolicy{web, *recreated}, Options{Previous: before.Config})
	g.Expect(err).NotTo(HaveOccurred())
	_, ok = fresh.Published("login")
	g.Expect(ok).To(BeFalse(), "a new object with the same name inherits nothing")
}

func TestEmptyNamespace(t *testing.T) {
	g := NewWithT(t)
	res, err := Namespace(ns, nil, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(res.JSON)).To(Equal(`{"schema":"sluice.dev/enforcer-config/v1","namespace":"shop","policies":[]}`))
}

func TestGCRARuleCompiles(t *testing.T) {
	g := NewWithT(t)
	p := sample(t, "public-api")
	i := slices.IndexFunc(p.Spec.Rules, func(r v1alpha1.Rule) bool { return r.Name == "api" })
	g.Expect(i).NotTo(Equal(-1))
	burst := int64(20)
	p.Spec.Rules[i].Algorithm = v1alpha1.AlgorithmGCRA
	p.Spec.Rules[i].Limits = []v1alpha1.Limit{{Requests: 60, Period: metav1.Duration{Duration: time.Minute}, Burst: &burst}}
	res, err := Namespace(ns, []v1alpha1.RateLimitPolicy{p}, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Errors).To(BeEmpty())
	parsed, err := config.Parse(res.JSON)
	g.Expect(err).NotTo(HaveOccurred(), "the enforcer accepts what the compiler writes")
	api := compiledRule(g, parsed.Policies[0], "api")
	g.Expect(api.Algorithm).To(Equal(config.GCRA))
	g.Expect(api.Limits).To(Equal([]config.Limit{{Requests: 60, Period: config.Duration{Duration: time.Minute}, Burst: 20}}))
}

func TestEveryProblemIsNamedByItsSpecPath(t *testing.T) {
	g := NewWithT(t)
	login := sample(t, "login")
	login.Spec.Rules[0].Algorithm = v1alpha1.AlgorithmFixedWindow
	login.Spec.Rules[0].Limits = []v1alpha1.Limit{{Requests: 5, Period: metav1.Duration{Duration: time.Minute}},
		{Requests: 10, Period: metav1.Duration{Duration: 60 * time.Second}}}
	login.Spec.Rules[0].Cost = 6
	_, err := Policy(&login, Options{})
	var perr *PolicyError
	g.Expect(errors.As(err, &perr)).To(BeTrue())
	g.Expect(perr.Message).To(Equal("the spec cannot be enforced as written: " +
		"spec.rules[0](login).limits[0]: cost 6 exceeds its capacity 5, so no request could ever pass; " +
		"spec.rules[0](login).limits[1].period: 1m0s is also the period of spec.rules[0](login).limits[0]: one limit per period"))
}

func TestAdaptiveReachesTheConfig(t *testing.T) {
	g := NewWithT(t)
	p := sample(t, "adaptive-api")
	compiled, err := Policy(&p, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(compiledRule(g, compiled, "api").Adaptive).To(Equal(&config.Adaptive{
		Latency: config.Duration{Duration: 250 * time.Millisecond}, ErrorRate: 500, Minimum: 2500,
		Interval: config.Duration{Duration: 10 * time.Second}}))
	g.Expect(compiledRule(g, compiled, "health").Adaptive).To(BeNil())

	// the defaults: minimum 25%, interval 10s
	p.Spec.Rules[1].Adaptive = &v1alpha1.Adaptive{Target: v1alpha1.AdaptiveTarget{ErrorRate: "0.5%"}}
	compiled, err = Policy(&p, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(compiledRule(g, compiled, "api").Adaptive).To(Equal(&config.Adaptive{ErrorRate: 50, Minimum: 2500,
		Interval: config.Duration{Duration: 10 * time.Second}}))

	// a percentage CEL lets through but with too many decimals is refused with its path
	p.Spec.Rules[1].Adaptive.Minimum = "12.345%"
	_, err = Policy(&p, Options{})
	g.Expect(err).To(MatchError(ContainSubstring("spec.rules[1](api).adaptive.minimum")))
}

// Replicated consistency reaches the wire format, on the policy's own Redis
// or on the default one; Async, the default, leaves it out.
func TestConsistency(t *testing.T) {
	g := NewWithT(t)
	withConsistency := func(name string, storage *v1alpha1.Storage) v1alpha1.RateLimitPolicy {
		p := sample(t, "login")
		p.Name, p.UID = name, types.UID("uid-"+name)
		p.Spec.Storage = storage
		return p
	}
	policies := []v1alpha1.RateLimitPolicy{
		withConsistency("own", &v1alpha1.Storage{SecretRef: &v1alpha1.SecretKeyReference{Name: "redis", Key: "url"}, Consistency: v1alpha1.ConsistencyReplicated}),
		withConsistency("default", &v1alpha1.Storage{Consistency: v1alpha1.ConsistencyReplicated}),
		withConsistency("async", &v1alpha1.Storage{Consistency: v1alpha1.ConsistencyAsync}),
		withConsistency("none", nil),
	}
	res, err := Namespace(ns, policies, Options{Secrets: map[string][]string{"redis": {"url"}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Errors).To(BeEmpty())
	got := map[string]config.Policy{}
	for _, p := range res.Config.Policies {
		got[p.Name] = p
	}
	g.Expect(got["own"].Consistency).To(Equal(config.ConsistencyReplicated))
	g.Expect(got["own"].RedisURLEnv).To(Equal("SLUICE_REDIS_URL_OWN"))
	g.Expect(got["default"].Consistency).To(Equal(config.ConsistencyReplicated))
	g.Expect(got["default"].RedisURLEnv).To(BeEmpty(), "no secretRef: the default Redis")
	g.Expect(got["async"].Consistency).To(BeEmpty())
	g.Expect(got["none"].Consistency).To(BeEmpty())
}
