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

package envtest

import (
	"errors"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/policyfile"
)

// createSpec sends a RateLimitPolicy with the given spec, written as a user
// would write it, to the API server as a dry run and returns its answer.
// selector and upstreamPort are filled in when the spec leaves them out.
func createSpec(specYAML string) error {
	policy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sluice.dev/v1alpha1",
		"kind":       "RateLimitPolicy",
		"metadata":   map[string]any{"generateName": "policy-", "namespace": namespace},
		"spec":       completeSpec(specYAML),
	}}
	return k8sClient.Create(ctx, policy, client.DryRunAll)
}

// parseSpec admits the same policy as sluice-enforcer --policy-file does.
func parseSpec(specYAML string) error {
	doc, err := yaml.Marshal(map[string]any{
		"apiVersion": "sluice.dev/v1alpha1",
		"kind":       "RateLimitPolicy",
		"metadata":   map[string]any{"name": "policy", "namespace": namespace},
		"spec":       completeSpec(specYAML),
	})
	Expect(err).NotTo(HaveOccurred())
	_, err = policyfile.Parse(doc)
	return err
}

// completeSpec decodes specYAML, adding selector and upstreamPort when it
// leaves them out.
func completeSpec(specYAML string) map[string]any {
	spec := map[string]any{}
	Expect(yaml.Unmarshal([]byte(specYAML), &spec)).To(Succeed())
	if _, ok := spec["selector"]; !ok {
		spec["selector"] = map[string]any{"matchLabels": map[string]any{"app": "api"}}
	}
	if _, ok := spec["upstreamPort"]; !ok {
		spec["upstreamPort"] = int64(8080)
	}
	return spec
}

// A rule that is valid on its own, for specs that test something else.
const apiRule = `{name: api, limits: [{requests: 60, period: 1m}]}`

var _ = Describe("RateLimitPolicy validation", func() {
	// One wrong field is one message: a limit of zero requests is not also
	// reported as a cost higher than the limit.
	DescribeTable("reports a zero limit once",
		func(spec, message string) {
			err := createSpec(spec)
			var status apierrors.APIStatus
			Expect(errors.As(err, &status)).To(BeTrue(), "want an API error, got %v", err)
			Expect(status.Status().Details.Causes).To(HaveLen(1), "one cause: %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
			Expect(err.Error()).NotTo(ContainSubstring("cost"))
		},
		Entry("requests: 0", `{rules: [{name: api, limits: [{requests: 0, period: 1m}]}]}`, "should be greater than or equal to 1"),
		Entry("burst: 0", `{rules: [{name: api, limits: [{requests: 10, period: 1m, burst: 0}]}]}`, "should be greater than or equal to 1"),
		Entry("requests: 0 in an override", `{rules: [`+apiRule+`], overrides: [{tenant: acme, rule: api, limits: [{requests: 0, period: 1m}]}]}`,
			"should be greater than or equal to 1"),
	)

	DescribeTable("rejects an invalid spec with a message that says what to fix",
		expectRefusedAlike,

		// Policy-wide settings.
		Entry("unknown consistency", `{storage: {consistency: Sync}, rules: [`+apiRule+`]}`, `Unsupported value: "Sync"`),
		Entry("empty selector", `{selector: {}, rules: [`+apiRule+`]}`,
			"selector is empty and would select every pod of the namespace: add matchLabels or matchExpressions"),
		Entry("upstreamPort that is the enforcer's proxy port", `{upstreamPort: 15080, rules: [`+apiRule+`]}`,
			"upstreamPort 15080 is the enforcer proxy port (sluice-http), so it would forward every request to itself: set the port your application listens on"),
		Entry("upstreamPort that is the enforcer's admin port", `{upstreamPort: 15081, rules: [`+apiRule+`]}`,
			"upstreamPort 15081 is the enforcer admin port (sluice-admin), so it would forward every request to itself"),
		Entry("upstreamPort that is the enforcer's debug port", `{upstreamPort: 9902, rules: [`+apiRule+`]}`,
			"upstreamPort 9902 is the enforcer debug port, so it would forward every request to itself"),
		Entry("timeout below 1ms", `{timeout: 500us, rules: [`+apiRule+`]}`,
			"timeout must be a duration between 1ms and 1s, for example 50ms"),
		Entry("timeout that is not a duration", `{timeout: fast, rules: [`+apiRule+`]}`,
			"timeout must be a duration between 1ms and 1s, for example 50ms"),
		Entry("timeout above 1s", `{timeout: 2s, rules: [`+apiRule+`]}`,
			"timeout must be a duration between 1ms and 1s, for example 50ms"),

		// Identity.
		Entry("identity source with two members",
			`{identity: {sources: [{header: {name: X-Tenant-ID}, clientIP: {}}]}, rules: [`+apiRule+`]}`,
			"an identity source sets exactly one of header, apiKey, jwtClaim, clientIP, shared or descriptor"),
		Entry("identity source with no member",
			`{identity: {sources: [{}]}, rules: [`+apiRule+`]}`,
			"an identity source sets exactly one of header, apiKey, jwtClaim, clientIP, shared or descriptor"),
		Entry("source after clientIP",
			`{identity: {sources: [{clientIP: {}}, {header: {name: X-Tenant-ID}}]}, rules: [`+apiRule+`]}`,
			"clientIP and shared always find a tenant, so sources after them are never used"),
		Entry("clientIP and shared together",
			`{identity: {sources: [{clientIP: {}}, {shared: {}}]}, rules: [`+apiRule+`]}`,
			"clientIP and shared always find a tenant, so sources after them are never used"),
		Entry("trusted proxy that is not a CIDR",
			`{identity: {sources: [{clientIP: {trustedProxies: [10.0.0.0/8, 10.1.2.3, 192.168.0.0/33]}}]}, rules: [`+apiRule+`]}`,
			"trustedProxies must be CIDRs such as 10.0.0.0/8 or fd00::/8 (use /32 or /128 for one address), not 10.1.2.3"),
		Entry("rule identity with two members",
			`{rules: [{name: api, limits: [{requests: 1, period: 1s}], identity: {sources: [{shared: {}, apiKey: {}}]}}]}`,
			"an identity source sets exactly one of header, apiKey, jwtClaim, clientIP, shared or descriptor"),

		Entry("jwtClaim without keys",
			`{identity: {sources: [{jwtClaim: {claim: tenant_id}}, {clientIP: {}}]}, rules: [`+apiRule+`]}`,
			"jwtClaim verifies tokens: set keys to the issuer's public keys (keys.jwksURL, or keys.secretRef or keys.configMapRef naming a JSON Web Key Set), or set verify: false"),
		Entry("tier jwtClaim without keys",
			`{tiers: {source: {jwtClaim: {claim: plan}}, default: free}, rules: [`+apiRule+`]}`,
			"jwtClaim verifies tokens: set keys to the issuer's public keys"),
		Entry("verify: false with keys",
			`{identity: {sources: [{jwtClaim: {claim: sub, verify: false, keys: {jwksURL: "https://issuer.example/jwks"}}}]}, rules: [`+apiRule+`]}`,
			"verify: false checks no keys, issuer or audiences: remove them, or remove verify: false"),
		Entry("keys with two members",
			`{identity: {sources: [{jwtClaim: {claim: sub, keys: {jwksURL: "https://issuer.example/jwks", secretRef: {name: issuer}}}}]}, rules: [`+apiRule+`]}`,
			"keys sets exactly one of jwksURL, secretRef or configMapRef"),
		Entry("jwksURL that is not a URL",
			`{identity: {sources: [{jwtClaim: {claim: sub, keys: {jwksURL: "issuer.example/jwks"}}}]}, rules: [`+apiRule+`]}`,
			"jwksURL must be an https (or http) URL"),

		// Tiers.
		Entry("tier source with two members",
			`{tiers: {source: {header: {name: X-Plan}, jwtClaim: {claim: plan}}, default: free}, rules: [`+apiRule+`]}`,
			"a tier source sets exactly one of header, jwtClaim or descriptor"),
		Entry("tiered limits without spec.tiers",
			`{rules: [`+apiRule+`, {name: plans, limits: [{tier: free, requests: 100, period: 1h}]}]}`,
			"limits of rule plans name a tier but spec.tiers is not set: add spec.tiers to say where the tier of a request comes from, or remove tier from the limits"),
		Entry("tiered limits that leave out the default tier",
			`{tiers: {source: {header: {name: X-Plan}}, default: free},
			  rules: [{name: plans, limits: [{tier: basic, requests: 500, period: 1h}, {tier: premium, requests: 5000, period: 1h}]}]}`,
			"rule plans has limits for named tiers only and none for the default tier free: add a limit for tier free, or a limit without a tier"),

		// Rules.
		Entry("exempt rule with limits",
			`{rules: [{name: health, exempt: true, limits: [{requests: 1, period: 1s}]}]}`,
			"rule health is exempt, so it cannot have limits: remove limits, or set exempt to false"),
		Entry("exempt rule with an algorithm",
			`{rules: [{name: health, exempt: true, algorithm: FixedWindow}]}`,
			"rule health is exempt: the requests it matches are never limited, so algorithm, cost and identity have no effect"),
		Entry("exempt rule with a cost",
			`{rules: [{name: health, exempt: true, cost: 5}]}`,
			"rule health is exempt: the requests it matches are never limited, so algorithm, cost and identity have no effect"),
		Entry("exempt rule with an identity",
			`{rules: [{name: health, exempt: true, identity: {sources: [{shared: {}}]}}]}`,
			"rule health is exempt: the requests it matches are never limited, so algorithm, cost and identity have no effect"),
		Entry("rule without limits",
			`{rules: [{name: api, algorithm: FixedWindow}]}`,
			"rule api has no limits: add at least one limit, or set exempt to true"),
		Entry("burst on a window rule",
			`{rules: [{name: api, algorithm: SlidingWindowCounter, limits: [{requests: 60, period: 1m, burst: 10}]}]}`,
			"rule api uses SlidingWindowCounter, which has no burst: remove burst from its limits, or use algorithm TokenBucket or GCRA"),
		Entry("cost above a token bucket's burst",
			`{rules: [{name: export, cost: 20, limits: [{requests: 100, period: 1m, burst: 10}]}]}`,
			"rule export has a cost higher than one of its limits allows per period (burst, or requests when burst is unset), so no request could ever pass: lower cost or raise that limit"),
		Entry("cost above a token bucket's requests when burst is unset",
			`{rules: [{name: export, cost: 20, limits: [{requests: 100, period: 1h}, {requests: 10, period: 1m}]}]}`,
			"rule export has a cost higher than one of its limits allows per period (burst, or requests when burst is unset), so no request could ever pass: lower cost or raise that limit"),
		Entry("cost above a window's requests",
			`{rules: [{name: export, algorithm: FixedWindow, cost: 11, limits: [{requests: 10, period: 1m}]}]}`,
			"rule export has a cost higher than one of its limits allows per period"),
		Entry("two untiered limits with the same period",
			`{rules: [{name: api, limits: [{requests: 60, period: 1m}, {requests: 100, period: 1m}]}]}`,
			"rule api has two limits for the same tier and period: keep one, or change the period of the other"),
		Entry("two limits with the same period written differently",
			`{rules: [{name: api, limits: [{requests: 60, period: 1h}, {requests: 100, period: 60m}]}]}`,
			"rule api has two limits for the same tier and period"),
		Entry("two limits for the same tier and period",
			`{tiers: {source: {header: {name: X-Plan}}, default: free},
			  rules: [{name: plans, limits: [{tier: free, requests: 100, period: 1h}, {tier: free, requests: 200, period: 1h}]}]}`,
			"rule plans has two limits for the same tier and period"),
		Entry("sliding window log too large to store",
			`{rules: [{name: api, algorithm: SlidingWindowLog, limits: [{requests: 100001, period: 24h}]}]}`,
			"rule api uses SlidingWindowLog, which stores one entry per request: keep each limit at or below 100000 requests per period, or use SlidingWindowCounter"),

		// Limits.
		Entry("period below 1s", `{rules: [{name: api, limits: [{requests: 1, period: 500ms}]}]}`,
			"period must be between 1s and 744h (31 days), for example 1m, 1h or 24h"),
		Entry("period above 31 days", `{rules: [{name: api, limits: [{requests: 1, period: 745h}]}]}`,
			"period must be between 1s and 744h (31 days), for example 1m, 1h or 24h"),
		Entry("period in days", `{rules: [{name: api, limits: [{requests: 1, period: 1d}]}]}`,
			"period must be a duration such as 30s, 1m, 1h or 24h; there is no day unit: write 24h for a day"),
		Entry("period in fractions of a second", `{rules: [{name: api, limits: [{requests: 1, period: 1500ms}]}]}`,
			"period must be a whole number of seconds, for example 1s or 90s"),

		// Matches.
		Entry("host with a port", `{rules: [{name: api, match: {hosts: ["api.example.com:443"]}, limits: [{requests: 1, period: 1s}]}]}`,
			"hosts must be lowercase DNS names such as api.example.com, or wildcards such as *.example.com"),
		Entry("host in upper case", `{rules: [{name: api, match: {hosts: [API.example.com]}, limits: [{requests: 1, period: 1s}]}]}`,
			"hosts must be lowercase DNS names"),
		Entry("wildcard inside a host", `{rules: [{name: api, match: {hosts: ["api.*.example.com"]}, limits: [{requests: 1, period: 1s}]}]}`,
			"hosts must be lowercase DNS names"),
		Entry("path match with two members", `{rules: [{name: api, match: {paths: [{exact: /a, prefix: /a}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"a path match sets exactly one of exact, prefix or glob"),
		Entry("empty path match", `{rules: [{name: api, match: {paths: [{}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"a path match sets exactly one of exact, prefix or glob"),
		Entry("exact path without a leading slash", `{rules: [{name: api, match: {paths: [{exact: login}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"exact paths start with /"),
		Entry("path prefix without a leading slash", `{rules: [{name: api, match: {paths: [{prefix: v1}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"path prefixes start with /"),
		Entry("path glob without a leading slash", `{rules: [{name: api, match: {paths: [{glob: "v1/*"}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"path globs start with /"),
		Entry("** inside a path segment", `{rules: [{name: api, match: {paths: [{glob: "/v1/files**"}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"** must be a whole path segment, as in /v1/**/items; use * inside a segment"),

		Entry("gRPC service written as a path", `{rules: [{name: api, match: {grpc: [{service: /shop.v1.Orders}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"service must be a fully qualified gRPC service name such as shop.v1.Orders"),
		Entry("gRPC service with its method", `{rules: [{name: api, match: {grpc: [{service: shop.v1.Orders/Create}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"service must be a fully qualified gRPC service name such as shop.v1.Orders"),
		Entry("gRPC service with an empty package segment", `{rules: [{name: api, match: {grpc: [{service: shop..Orders}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"service must be a fully qualified gRPC service name such as shop.v1.Orders"),
		Entry("gRPC service segment starting with a digit", `{rules: [{name: api, match: {grpc: [{service: shop.1v.Orders}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"service must be a fully qualified gRPC service name such as shop.v1.Orders"),
		Entry("gRPC service with a wildcard", `{rules: [{name: api, match: {grpc: [{service: "shop.v1.*"}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"service must be a fully qualified gRPC service name such as shop.v1.Orders"),
		Entry("gRPC service too long", `{rules: [{name: api, match: {grpc: [{service: `+strings.Repeat("a", 254)+`}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"Too long"),
		Entry("gRPC match without a service", `{rules: [{name: api, match: {grpc: [{method: Create}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"spec.rules[0].match.grpc[0].service: Required value"),
		Entry("gRPC method with a path", `{rules: [{name: api, match: {grpc: [{service: shop.v1.Orders, method: /Create}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"method must be the name of a gRPC method such as Create"),
		Entry("gRPC method with a dot", `{rules: [{name: api, match: {grpc: [{service: shop.v1.Orders, method: Orders.Create}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"method must be the name of a gRPC method such as Create"),
		Entry("gRPC method that is empty", `{rules: [{name: api, match: {grpc: [{service: shop.v1.Orders, method: ""}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"spec.rules[0].match.grpc[0].method: Invalid value"),
		Entry("more than 16 gRPC matches", `{rules: [{name: api, match: {grpc: [`+strings.Repeat(`{service: shop.v1.Orders}, `, 17)+`]}, limits: [{requests: 1, period: 1s}]}]}`,
			"spec.rules[0].match.grpc: Too many: 17: must have at most 16 items"),
		Entry("gRPC matches with methods that leave out POST", `{rules: [{name: api, match: {methods: [GET, PUT], grpc: [{service: shop.v1.Orders}]}, limits: [{requests: 1, period: 1s}]}]}`,
			"gRPC calls are POST requests, so the grpc entries of a match whose methods leave out POST match nothing: add POST to methods, remove methods, or put the gRPC calls in a rule of their own"),
		Entry("unknown upstream protocol", `{upstreamProtocol: HTTP2, rules: [`+apiRule+`]}`, `spec.upstreamProtocol: Unsupported value: "HTTP2": supported values: "HTTP1", "H2C"`),
		Entry("upstream protocol in lower case", `{upstreamProtocol: h2c, rules: [`+apiRule+`]}`, `spec.upstreamProtocol: Unsupported value: "h2c"`),

		// Overrides.
		Entry("override limit with a tier",
			`{tiers: {source: {header: {name: X-Plan}}, default: free},
			  rules: [`+apiRule+`], overrides: [{tenant: acme, rule: api, limits: [{tier: free, requests: 1, period: 1m}]}]}`,
			"override limits apply to the tenant whatever its tier, so they cannot name a tier: remove tier"),
		Entry("override with two limits of the same period",
			`{rules: [`+apiRule+`], overrides: [{tenant: acme, rule: api, limits: [{requests: 1, period: 1m}, {requests: 2, period: 60s}]}]}`,
			"two limits of this override have the same period: keep one limit per period"),

		// Structure the schema enforces without CEL.
		Entry("two rules with the same name", `{rules: [`+apiRule+`, `+apiRule+`]}`, "Duplicate value"),
		Entry("unknown algorithm", `{rules: [{name: api, algorithm: LeakyBucket, limits: [{requests: 1, period: 1s}]}]}`, "Unsupported value"),
	)

	// How overrides relate to their rules is checked by the compiler: the
	// CEL cost of relating 10,000 overrides to their rules is beyond the API
	// server's budget. The policy's status says so (Accepted False,
	// InvalidSpec), and --policy-file refuses it.
	DescribeTable("the compiler refuses an override that does not fit its rule, as --policy-file does",
		func(spec, message string) {
			Expect(createSpec(spec)).To(Succeed(), "the API server admits it")
			Expect(compileSpec(spec)).To(MatchError(ContainSubstring(message)))
		},
		Entry("override of a rule that does not exist",
			`{rules: [`+apiRule+`], overrides: [{tenant: acme, rule: exprts, limits: [{requests: 1, period: 1m}]}]}`,
			"an override names rule exprts, which does not exist: use the name of a rule in spec.rules"),
		Entry("override of an exempt rule",
			`{rules: [`+apiRule+`, {name: health, exempt: true}], overrides: [{tenant: acme, rule: health, limits: [{requests: 1, period: 1m}]}]}`,
			"an override names rule health, which is exempt and never limits requests: remove the override, or set exempt to false on the rule"),
		Entry("override with burst on a window rule",
			`{rules: [{name: api, algorithm: FixedWindow, limits: [{requests: 60, period: 1m}]}],
			  overrides: [{tenant: acme, rule: api, limits: [{requests: 600, period: 1m, burst: 100}]}]}`,
			"an override of rule api sets burst, which only applies to TokenBucket and GCRA rules: remove burst from its limits"),
		Entry("override too large for a sliding window log",
			`{rules: [{name: api, algorithm: SlidingWindowLog, limits: [{requests: 60, period: 1m}]}],
			  overrides: [{tenant: acme, rule: api, limits: [{requests: 1000000, period: 1m}]}]}`,
			"an override of rule api allows more than 100000 requests per period, but the rule uses SlidingWindowLog, which stores one entry per request"),
		Entry("override limit below the rule's cost",
			`{rules: [{name: export, cost: 10, limits: [{requests: 100, period: 1m}]}],
			  overrides: [{tenant: acme, rule: export, limits: [{requests: 1000, period: 1m, burst: 5}]}]}`,
			"an override of rule export has a limit that allows fewer requests per period (burst, or requests when burst is unset) than the cost of the rule"),
		Entry("two overrides for the same tenant and rule",
			`{rules: [`+apiRule+`], overrides: [{tenant: acme, rule: api, limits: [{requests: 1, period: 1m}]}, {tenant: acme, rule: api, limits: [{requests: 2, period: 1m}]}]}`,
			"spec.overrides[1](acme): spec.overrides[0] is also for tenant acme and rule api: keep one override per tenant and rule"),
		Entry("a calendar override of a TokenBucket rule",
			`{rules: [`+apiRule+`], overrides: [{tenant: acme, rule: api, limits: [{requests: 10, calendar: {unit: Day}}]}]}`,
			"an override has a calendar limit, but its rule does not use FixedWindow"),
	)

	DescribeTable("accepts a valid spec",
		expectAcceptedAlike,
		Entry("the smallest policy", `{rules: [`+apiRule+`]}`),
		Entry("every identity source in order",
			`{identity: {sources: [{header: {name: X-Tenant-ID}}, {apiKey: {}}, {jwtClaim: {claim: tenant_id, keys: {jwksURL: "https://issuer.example/.well-known/jwks.json"}, issuer: "https://issuer.example", audiences: [api]}}, {clientIP: {trustedProxies: [10.0.0.0/8, "fd00::/8", 192.0.2.7/32]}}], partitionBy: [Method, Path, Host]},
			  rules: [`+apiRule+`]}`),
		Entry("one shared budget", `{identity: {sources: [{shared: {}}]}, rules: [`+apiRule+`]}`),
		Entry("untiered limit as the fallback of a tiered rule",
			`{tiers: {source: {jwtClaim: {claim: plan, keys: {secretRef: {name: issuer}}}}, default: free},
			  rules: [{name: plans, limits: [{requests: 100, period: 1h}, {tier: premium, requests: 5000, period: 1h}]}]}`),
		Entry("jwtClaim read unverified, as asked",
			`{identity: {sources: [{jwtClaim: {claim: sub, verify: false}}, {clientIP: {}}]}, tiers: {source: {jwtClaim: {claim: plan, keys: {configMapRef: {name: issuer, key: keys.json}}}}, default: free}, rules: [`+apiRule+`]}`),
		Entry("several windows per tier",
			`{tiers: {source: {header: {name: X-Plan}}, default: free},
			  rules: [{name: plans, algorithm: FixedWindow, limits: [{tier: free, requests: 10, period: 1m}, {tier: free, requests: 100, period: 24h}, {tier: premium, requests: 100, period: 1m}]}]}`),
		Entry("burst below requests and cost equal to burst",
			`{rules: [{name: api, cost: 10, limits: [{requests: 600, period: 1m, burst: 10}]}]}`),
		Entry("exempt rule next to a catch-all rule",
			`{rules: [{name: health, exempt: true, match: {paths: [{exact: /healthz}]}}, `+apiRule+`]}`),
		Entry("every kind of match",
			`{rules: [{name: api, match: {hosts: [api.example.com, "*.example.com"], methods: [GET, POST], paths: [{exact: /login}, {prefix: /v1/}, {glob: "/v1/users/*/orders/**"}, {glob: "/**"}]}, limits: [{requests: 1, period: 1s}]}]}`),
		Entry("a gRPC server",
			`{upstreamProtocol: H2C, rules: [{name: health, exempt: true, match: {grpc: [{service: grpc.health.v1.Health}]}},
			  {name: create, match: {grpc: [{service: shop.v1.Orders, method: Create}, {service: shop.v1.Carts}]}, limits: [{requests: 10, period: 1s}]}, `+apiRule+`]}`),
		Entry("gRPC matches next to paths, hosts and POST",
			`{rules: [{name: api, match: {hosts: [api.example.com], methods: [POST, PUT], paths: [{prefix: /v1/orders}], grpc: [{service: Greeter, method: SayHello}, {service: _internal.v2_beta.Admin_Service, method: _Reset2}]}, limits: [{requests: 1, period: 1s}]}]}`),
		Entry("gRPC matches with an empty methods list", `{rules: [{name: api, match: {methods: [], grpc: [{service: shop.v1.Orders}]}, limits: [{requests: 1, period: 1s}]}]}`),
		Entry("16 gRPC matches", `{rules: [{name: api, match: {grpc: [`+strings.Repeat(`{service: shop.v1.Orders}, `, 16)+`]}, limits: [{requests: 1, period: 1s}]}]}`),
		Entry("the longest gRPC service and method", `{rules: [{name: api, match: {grpc: [{service: `+strings.Repeat("a", 253)+`, method: `+strings.Repeat("b", 128)+`}]}, limits: [{requests: 1, period: 1s}]}]}`),
		Entry("upstream protocol HTTP1", `{upstreamProtocol: HTTP1, rules: [`+apiRule+`]}`),
		Entry("longest period", `{rules: [{name: api, limits: [{requests: 1000000, period: 744h}]}]}`),
		Entry("override of a token bucket rule with burst",
			`{rules: [`+apiRule+`], overrides: [{tenant: acme, rule: api, limits: [{requests: 600, period: 1m, burst: 100}, {requests: 10000, period: 24h}]}, {tenant: globex, rule: api, limits: [{requests: 1, period: 1m}]}]}`),
		Entry("GCRA with a burst, and an override with a burst",
			`{rules: [{name: api, algorithm: GCRA, cost: 5, limits: [{requests: 600, period: 1m, burst: 20}, {requests: 10000, period: 24h}]}],
			  overrides: [{tenant: acme, rule: api, limits: [{requests: 6000, period: 1m, burst: 200}]}]}`),
		Entry("storage secret", `{storage: {secretRef: {name: redis}}, rules: [`+apiRule+`]}`),
		Entry("replicated counts on the default Redis", `{storage: {consistency: Replicated}, rules: [`+apiRule+`]}`),
		Entry("replicated counts on the policy's Redis", `{storage: {secretRef: {name: redis}, consistency: Replicated}, rules: [`+apiRule+`]}`),
	)
})

// expectRefusedAlike is the body of the tables of refused specs: the API
// server refuses spec as invalid with message, and --policy-file refuses
// it with the same message.
func expectRefusedAlike(spec, message string) {
	err := createSpec(spec)
	GinkgoWriter.Printf("API server: %v\n", err)
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
	Expect(err.Error()).To(ContainSubstring(message))
	Expect(parseSpec(spec)).To(MatchError(ContainSubstring(message)), "--policy-file refuses it alike")
}

// expectAcceptedAlike is the body of the tables of valid specs: both the
// API server and --policy-file accept spec.
func expectAcceptedAlike(spec string) {
	Expect(createSpec(spec)).To(Succeed())
	Expect(parseSpec(spec)).To(Succeed(), "--policy-file accepts it alike")
}
