package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestLoadExample(t *testing.T) {
	g := NewWithT(t)
	c, err := Load("testdata/shop.json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Policies).To(HaveLen(2))
	exports := c.Policies[0].Rules[3]
	g.Expect(exports.Limits[1].Period.Duration).To(Equal(24 * time.Hour))
	g.Expect(exports.Overrides[0].Tenant).To(Equal("acme"))
	g.Expect(c.Policies[0].Rules[2].TierLimits["premium"][0].Requests).To(Equal(int64(5000)))

	g.Expect(c.ForPod(map[string]string{"app": "api"}).Policies).To(HaveLen(1))
	g.Expect(c.ForPod(map[string]string{"app": "api", "tier": "admin"}).Policies).To(HaveLen(2))
	g.Expect(c.ForPod(map[string]string{"app": "web"}).Policies).To(BeEmpty())

	// The hash follows content, not formatting.
	again, err := json.MarshalIndent(c, "", "    ")
	g.Expect(err).NotTo(HaveOccurred())
	reparsed, err := Parse(again)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reparsed.Hash()).To(Equal(c.Hash()))
	reparsed.Policies[0].Rules[1].Limits[0].Requests = 61
	g.Expect(reparsed.Hash()).NotTo(Equal(c.Hash()))
}

func TestInvalidConfigsAreRefusedWithWhereAndWhy(t *testing.T) {
	cases := map[string]struct {
		edit func(c map[string]any)
		want string
	}{
		"unknown schema": {func(c map[string]any) { c["schema"] = "sluice.dev/enforcer-config/v9" },
			`schema "sluice.dev/enforcer-config/v9" is not supported`},
		"unknown field": {func(c map[string]any) { policy(c, 0)["rateLimit"] = 5 }, `unknown field "rateLimit"`},
		"bad mode":      {func(c map[string]any) { policy(c, 0)["mode"] = "Block" }, `policies[0](public-api).mode: "Block" is not one of Enforce, DryRun`},
		"timeout too long": {func(c map[string]any) { policy(c, 0)["timeout"] = "5s" },
			"policies[0](public-api).timeout: must be between 1ms and 1s, got 5s"},
		"bad duration": {func(c map[string]any) { policy(c, 0)["timeout"] = "fast" }, `invalid duration "fast"`},
		"zero requests": {func(c map[string]any) { limit(c, 1, 0)["requests"] = 0 },
			"policies[0](public-api).rules[1](api).limits[0].requests: must be at least 1, got 0"},
		"cost above burst": {func(c map[string]any) { rule(c, 1)["cost"] = 61 },
			"rules[1](api).limits[0]: cost 61 exceeds its capacity 60"},
		"unknown algorithm": {func(c map[string]any) { rule(c, 1)["algorithm"] = "Leaky" },
			`rules[1](api).algorithm: "Leaky" is not one of TokenBucket, SlidingWindowLog`},
		"unknown leasing": {func(c map[string]any) { rule(c, 1)["leasing"] = "Always" },
			`rules[1](api).leasing: "Always" is not one of Auto, Off`},
		"sub-millisecond period": {func(c map[string]any) { limit(c, 1, 0)["period"] = "1500us" },
			"rules[1](api).limits[0].period: must be a whole number of milliseconds, at least 1ms, got 1.5ms"},
		"two limits of one period": {func(c map[string]any) {
			rule(c, 1)["limits"] = []any{map[string]any{"requests": 60, "period": "1m"}, map[string]any{"requests": 100, "period": "60s"}}
		}, "rules[1](api).limits[1].period: 1m0s is also the period of policies[0](public-api).rules[1](api).limits[0]"},
		"no limits": {func(c map[string]any) { delete(rule(c, 1), "limits") }, "rules[1](api).limits: a rule needs 1 to 8 limits, got 0"},
		"partition twice": {func(c map[string]any) {
			rule(c, 1)["identity"] = map[string]any{"sources": []any{map[string]any{"shared": map[string]any{}}}, "partitionBy": []any{"Path", "Path"}}
		}, "rules[1](api).identity.partitionBy[1]: Path is named twice"},
		"bad CIDR": {func(c map[string]any) {
			rule(c, 1)["identity"] = map[string]any{"sources": []any{map[string]any{"clientIP": map[string]any{"trustedProxies": []any{"10.0.0.0/33"}}}}}
		}, `"10.0.0.0/33" is not a CIDR`},
		"two members in a source": {func(c map[string]any) {
			rule(c, 1)["identity"] = map[string]any{"sources": []any{map[string]any{"shared": map[string]any{}, "header": map[string]any{"name": "X"}}}}
		}, "must be exactly one of header, apiKey, jwtClaim, clientIP or shared"},
		"jwtClaim verified by two key sets": {func(c map[string]any) {
			rule(c, 1)["identity"] = jwtVerified(map[string]any{"jwksURL": "https://issuer.example/jwks", "jwks": map[string]any{"keys": []any{}}})
		}, "rules[1](api).identity.sources[0].jwtClaim.verify: must set exactly one of jwksURL or jwks"},
		"jwksURL not a URL": {func(c map[string]any) {
			rule(c, 1)["identity"] = jwtVerified(map[string]any{"jwksURL": "file:///etc/jwks.json"})
		}, `jwtClaim.verify.jwksURL: "file:///etc/jwks.json" is not an http or https URL`},
		"a symmetric key": {func(c map[string]any) {
			rule(c, 1)["identity"] = jwtVerified(map[string]any{"jwks": map[string]any{"keys": []any{map[string]any{"kty": "oct", "kid": "h", "k": "c2VjcmV0"}}}})
		}, `jwtClaim.verify.jwks: key 0 (kid "h") is of type "oct"`},
		"exempt with limits": {func(c map[string]any) { rule(c, 0)["limits"] = []any{map[string]any{"requests": 1, "period": "1s"}} },
			"an exempt rule has no limits"},
		"path without slash": {func(c map[string]any) {
			rule(c, 0)["match"] = map[string]any{"paths": []any{map[string]any{"exact": "healthz"}}}
		}, `"healthz" must start with /`},
		"duplicate rule": {func(c map[string]any) { rule(c, 2)["name"] = "api" }, `duplicate rule "api"`},
		"bad selector": {func(c map[string]any) {
			policy(c, 0)["selector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": "a", "operator": "Near"}}}
		}, "policies[0](public-api).selector"},
	}
	base, err := os.ReadFile("testdata/shop.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var doc map[string]any
			g.Expect(json.Unmarshal(base, &doc)).To(Succeed())
			c.edit(doc)
			data, err := json.Marshal(doc)
			g.Expect(err).NotTo(HaveOccurred())
			path := filepath.Join(t.TempDir(), "config.json")
			g.Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
			_, err = Load(path)
			g.Expect(err).To(MatchError(ContainSubstring(c.want)))
			g.Expect(err).To(MatchError(ContainSubstring(path)), "the error names the file")
		})
	}
}

func TestEveryProblemIsReported(t *testing.T) {
	g := NewWithT(t)
	doc := exampleDoc(t)
	limit(doc, 1, 0)["requests"] = 0
	policy(doc, 0)["mode"] = "Block"
	_, err := Parse(marshal(t, doc))
	g.Expect(err).To(MatchError(And(ContainSubstring(".mode: "), ContainSubstring(".limits[0].requests: "))))
}

func TestOnlyWhiteSpaceMayFollowTheDocument(t *testing.T) {
	valid := marshal(t, exampleDoc(t))
	for name, tail := range map[string]string{
		"a closing brace":   "}",
		"a closing bracket": "]",
		"a second document": ` {"schema":"x"}`,
		"a word":            " trailing",
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Parse(append(slices.Clone(valid), tail...))
			g.Expect(err).To(MatchError(ContainSubstring("trailing data after the configuration")))
		})
	}
	g := NewWithT(t)
	_, err := Parse(append(slices.Clone(valid), " \n\t"...))
	g.Expect(err).NotTo(HaveOccurred(), "white space after the document is fine")
}

func exampleDoc(t *testing.T) map[string]any {
	t.Helper()
	base, err := os.ReadFile("testdata/shop.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(base, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func marshal(t *testing.T, doc map[string]any) []byte {
	t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func policy(c map[string]any, i int) map[string]any {
	return c["policies"].([]any)[i].(map[string]any)
}

func jwtVerified(verify map[string]any) map[string]any {
	return map[string]any{"sources": []any{map[string]any{"jwtClaim": map[string]any{"claim": "sub", "header": "Authorization", "verify": verify}}}}
}

func rule(c map[string]any, i int) map[string]any {
	return policy(c, 0)["rules"].([]any)[i].(map[string]any)
}

func limit(c map[string]any, r, i int) map[string]any {
	return rule(c, r)["limits"].([]any)[i].(map[string]any)
}

func TestGCRAIsAcceptedWithItsBurst(t *testing.T) {
	g := NewWithT(t)
	doc := exampleDoc(t)
	rule(doc, 1)["algorithm"] = "GCRA"
	limit(doc, 1, 0)["burst"] = 5
	rule(doc, 1)["cost"] = 6
	_, err := Parse(marshal(t, doc))
	g.Expect(err).To(MatchError(ContainSubstring("rules[1](api).limits[0]: cost 6 exceeds its capacity 5")),
		"a GCRA window's capacity is its burst")

	rule(doc, 1)["cost"] = 5
	c, err := Parse(marshal(t, doc))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Policies[0].Rules[1].Algorithm).To(Equal(GCRA))
	g.Expect(c.Policies[0].Rules[1].Limits[0].Burst).To(Equal(int64(5)))
}

func TestFormatPeriodAsPeopleWriteIt(t *testing.T) {
	for d, want := range map[time.Duration]string{
		500 * time.Millisecond:    "500ms",
		time.Second:               "1s",
		time.Minute:               "1m",
		90 * time.Minute:          "1h30m",
		24 * time.Hour:            "24h",
		time.Hour + 2*time.Second: "1h2s",
		1500 * time.Millisecond:   "1.5s",
	} {
		if got := FormatPeriod(d); got != want {
			t.Errorf("FormatPeriod(%s) = %q, want %q", d, got, want)
		}
	}
}
