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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/policyfile"
)

// compileSpec admits the policy as --policy-file does, then compiles it as
// the manager and sluice-enforcer --policy-file do.
func compileSpec(specYAML string) error {
	doc, err := yaml.Marshal(map[string]any{
		"apiVersion": "sluice.dev/v1alpha1",
		"kind":       "RateLimitPolicy",
		"metadata":   map[string]any{"name": "policy", "namespace": namespace},
		"spec":       completeSpec(specYAML),
	})
	Expect(err).NotTo(HaveOccurred())
	policies, err := policyfile.Parse(doc)
	if err != nil {
		return err
	}
	for i := range policies {
		if _, err := compile.Policy(&policies[i], compile.Options{}); err != nil {
			return err
		}
	}
	return nil
}

var _ = Describe("RateLimitPolicy Concurrency validation", func() {
	DescribeTable("rejects a Concurrency rule written wrong, with a message naming the field and the fix",
		expectRefusedAlike,
		Entry("requests beside concurrent",
			`{rules: [{name: exports, algorithm: Concurrency, limits: [{concurrent: 4, requests: 10, period: 1s}]}]}`,
			"rule exports uses Concurrency, which limits the requests a tenant has in flight at once: give each of its limits concurrent"),
		Entry("a per-period limit on a Concurrency rule",
			`{rules: [{name: exports, algorithm: Concurrency, limits: [{requests: 10, period: 1s}]}]}`,
			"rule exports uses Concurrency"),
		Entry("concurrent on a TokenBucket rule",
			`{rules: [{name: api, limits: [{concurrent: 4}]}]}`,
			"rule api uses TokenBucket, which counts requests per period: give each of its limits requests and a period or calendar, and remove concurrent"),
		Entry("a limit without requests on a FixedWindow rule",
			`{rules: [{name: api, algorithm: FixedWindow, limits: [{period: 1s}]}]}`,
			"rule api uses FixedWindow, which counts requests per period"),
		Entry("a calendar on a Concurrency limit",
			`{rules: [{name: exports, algorithm: Concurrency, limits: [{concurrent: 4, calendar: {unit: Day}}]}]}`,
			"rule exports uses Concurrency, which limits the requests a tenant has in flight at once"),
		Entry("a calendar limit without requests",
			`{rules: [{name: api, algorithm: FixedWindow, limits: [{calendar: {unit: Month}}]}]}`,
			"rule api uses FixedWindow, which counts requests per period"),
		Entry("a response cost on a Concurrency rule",
			`{rules: [{name: exports, algorithm: Concurrency, limits: [{concurrent: 4}], responseCost: {header: X-Cost}}]}`,
			"rule exports uses Concurrency, which holds slots while a request runs and charges nothing after it"),
		Entry("counted answers on a Concurrency rule",
			`{rules: [{name: exports, algorithm: Concurrency, limits: [{concurrent: 4}], countResponses: {statuses: ["5xx"]}}]}`,
			"remove responseCost and countResponses"),
		Entry("two concurrent limits for one tier",
			`{rules: [{name: exports, algorithm: Concurrency, limits: [{concurrent: 4}, {concurrent: 8}]}]}`,
			"rule exports uses Concurrency and has two limits for the same tier"),
		Entry("a cost above concurrent",
			`{rules: [{name: exports, algorithm: Concurrency, cost: 5, limits: [{concurrent: 4}]}]}`,
			"rule exports has a cost higher than one of its concurrent limits"),
		Entry("adaptive",
			`{rules: [{name: exports, algorithm: Concurrency, limits: [{concurrent: 4}], adaptive: {target: {latency: 250ms}}}]}`,
			"rule exports uses Concurrency, which adaptive cannot scale: remove adaptive"),
		Entry("concurrent of 0",
			`{rules: [{name: exports, algorithm: Concurrency, limits: [{concurrent: 0}]}]}`,
			"concurrent"),
	)

	// Overrides of Concurrency rules are checked by the compiler (the CEL
	// cost of relating overrides to their rules is beyond the API server's
	// budget): the policy's status says so, and --policy-file refuses it.
	DescribeTable("the compiler refuses overrides written wrong, as --policy-file does",
		func(spec, message string) {
			Expect(createSpec(spec)).To(Succeed(), "the API server admits it")
			Expect(compileSpec(spec)).To(MatchError(ContainSubstring(message)))
		},
		Entry("an override with requests for a Concurrency rule",
			`{rules: [{name: exports, algorithm: Concurrency, limits: [{concurrent: 4}]}], overrides: [{tenant: acme, rule: exports, limits: [{requests: 10, period: 1s}]}]}`,
			"overrides[0](acme).limits[0]: a Concurrency limit has concurrent only: remove requests, period and burst"),
		Entry("an override with two limits for a Concurrency rule",
			`{rules: [{name: exports, algorithm: Concurrency, limits: [{concurrent: 4}]}], overrides: [{tenant: acme, rule: exports, limits: [{concurrent: 2}, {concurrent: 3}]}]}`,
			"a Concurrency rule has exactly one limit"),
		Entry("an override below the cost of a Concurrency rule",
			`{rules: [{name: exports, algorithm: Concurrency, cost: 3, limits: [{concurrent: 4}]}], overrides: [{tenant: acme, rule: exports, limits: [{concurrent: 2}]}]}`,
			"cost 3 exceeds concurrent 2"),
		Entry("an override with concurrent for a TokenBucket rule",
			`{rules: [{name: api, limits: [{requests: 10, period: 1s}]}], overrides: [{tenant: acme, rule: api, limits: [{concurrent: 4}]}]}`,
			"overrides[0](acme).limits[0].concurrent: is for algorithm Concurrency"),
	)

	DescribeTable("accepts Concurrency rules",
		func(spec string) {
			Expect(createSpec(spec)).To(Succeed())
			Expect(parseSpec(spec)).To(Succeed(), "--policy-file accepts it alike")
			Expect(compileSpec(spec)).To(Succeed(), "the compiler accepts it")
		},
		Entry("one limit", `{rules: [{name: exports, algorithm: Concurrency, limits: [{concurrent: 4}]}]}`),
		Entry("with cost, ban and an override",
			`{rules: [{name: exports, algorithm: Concurrency, cost: 2, limits: [{concurrent: 4}], ban: {after: {denials: 10, within: 1m}, durations: [5m]}}], overrides: [{tenant: acme, rule: exports, limits: [{concurrent: 16}]}]}`),
		Entry("with onLimit.delay", `{rules: [{name: exports, algorithm: Concurrency, limits: [{concurrent: 4}], onLimit: {delay: {max: 2s, maxQueued: 8}}}]}`),
		Entry("beside a rate limit", `{rules: [{name: api, limits: [{requests: 100, period: 1m}]}, {name: exports, algorithm: Concurrency, limits: [{concurrent: 3}]}]}`),
	)
})
