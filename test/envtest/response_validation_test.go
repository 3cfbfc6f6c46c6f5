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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

var _ = Describe("RateLimitPolicy responseCost and countResponses validation", func() {
	DescribeTable("rejects what cannot be charged from the answer, with a message naming the field and the fix",
		expectRefusedAlike,
		Entry("responseCost on SlidingWindowLog",
			`{rules: [{name: llm, algorithm: SlidingWindowLog, limits: [{requests: 1000, period: 1m}], responseCost: {header: X-Sluice-Cost}}]}`,
			"rule llm uses SlidingWindowLog, which stores one entry per request and cannot charge a cost after the answer"),
		Entry("responseCost with both header and jsonUsage",
			`{rules: [{name: llm, limits: [{requests: 1000, period: 1m}], responseCost: {header: X-Sluice-Cost, jsonUsage: total_tokens}}]}`,
			"responseCost sets exactly one of header"),
		Entry("responseCost with neither",
			`{rules: [{name: llm, limits: [{requests: 1000, period: 1m}], responseCost: {}}]}`,
			"responseCost sets exactly one of header"),
		Entry("a header name with a space",
			`{rules: [{name: llm, limits: [{requests: 1000, period: 1m}], responseCost: {header: "X Cost"}}]}`,
			"responseCost.header"),
		Entry("a jsonUsage that is a path",
			`{rules: [{name: llm, limits: [{requests: 1000, period: 1m}], responseCost: {jsonUsage: usage.total_tokens}}]}`,
			`spec.rules[0].responseCost.jsonUsage: Invalid value: "usage.total_tokens": jsonUsage names the field inside usage, such as total_tokens (not a path such as usage.total_tokens)`),
		Entry("responseCost with onLimit.delay",
			`{rules: [{name: llm, limits: [{requests: 1000, period: 1m}], responseCost: {header: X-Sluice-Cost}, onLimit: {delay: {max: 1s}}}]}`,
			"rule llm sets responseCost and onLimit.delay"),
		Entry("responseCost and countResponses together",
			`{rules: [{name: llm, limits: [{requests: 1000, period: 1m}], responseCost: {header: X-Sluice-Cost}, countResponses: {statuses: ["200"]}}]}`,
			"rule llm sets both responseCost and countResponses"),
		Entry("countResponses on an exempt rule",
			`{rules: [`+apiRule+`, {name: health, exempt: true, countResponses: {statuses: ["5xx"]}}]}`,
			"rule health is exempt, so nothing is charged for its answers"),
		Entry("countResponses with nothing to count",
			`{rules: [{name: login, limits: [{requests: 5, period: 1m}], countResponses: {}}]}`,
			"countResponses counts nothing"),
		Entry("a status that is not a code or class",
			`{rules: [{name: login, limits: [{requests: 5, period: 1m}], countResponses: {statuses: ["4x"]}}]}`,
			"statuses must be HTTP status codes such as"),
		Entry("an unknown gRPC code",
			`{rules: [{name: login, limits: [{requests: 5, period: 1m}], countResponses: {grpcStatuses: [DENIED]}}]}`,
			"grpcStatuses"),
	)

	It("refuses unquoted statuses: the API server as a type error, --policy-file with the fix", func() {
		// The API server checks a value's type before any rule of the CRD
		// (CEL or pattern), and a string list cannot take an int without
		// x-kubernetes-int-or-string, which the Go type could not hold:
		// its message cannot say more than the type.
		spec := `{rules: [{name: login, limits: [{requests: 5, period: 1d}], countResponses: {statuses: [401, 403]}}]}`
		err := createSpec(spec)
		GinkgoWriter.Printf("API server: %v\n", err)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		Expect(err.Error()).To(ContainSubstring(`spec.rules[0].countResponses.statuses[0]: Invalid value: "integer": spec.rules[0].countResponses.statuses[0] in body must be of type string`))
		Expect(parseSpec(spec)).To(MatchError(And(
			ContainSubstring(`spec.rules[0].countResponses.statuses[0]: Invalid value: 401: write HTTP statuses as quoted strings, such as "401" or "5xx"`),
			ContainSubstring(`spec.rules[0].limits[0].period: Invalid value: "1d"`))),
			"--policy-file says the fix and checks the rest of the policy in the same pass")
	})

	It("rejects responseCost and countResponses in a rateLimitService policy, whose service sees no answers", func() {
		spec := `{` + service + `rules: [{name: checkout, match: {descriptors: [{key: generic_key, value: checkout}]}, limits: [{requests: 10, period: 1s}], countResponses: {statuses: ["401"]}}]}`
		err := createAsWritten(spec)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		const message = "rule checkout of a rateLimitService policy sets responseCost or countResponses, but the rate limit service never sees the answers"
		Expect(err.Error()).To(ContainSubstring(message))
		Expect(parseAsWritten(spec)).To(MatchError(ContainSubstring(message)), "--policy-file refuses it alike")
	})

	DescribeTable("accepts costs from the answer on the algorithms that settle them",
		expectAcceptedAlike,
		Entry("a header on FixedWindow",
			`{rules: [{name: llm, algorithm: FixedWindow, limits: [{requests: 100000, period: 24h}], responseCost: {header: X-Sluice-Cost}}]}`),
		Entry("jsonUsage on TokenBucket with a cost up front",
			`{rules: [{name: llm, cost: 100, limits: [{requests: 10000, period: 1m}], responseCost: {jsonUsage: total_tokens}}]}`),
		Entry("GCRA", `{rules: [{name: llm, algorithm: GCRA, limits: [{requests: 1000, period: 1m}], responseCost: {header: X-Cost}}]}`),
		Entry("SlidingWindowCounter", `{rules: [{name: llm, algorithm: SlidingWindowCounter, limits: [{requests: 1000, period: 1h}], responseCost: {jsonUsage: completion_tokens}}]}`),
		Entry("a login that counts failures, with a ban",
			`{rules: [{name: login, limits: [{requests: 5, period: 15m}], countResponses: {statuses: ["401", "403", "5xx"], grpcStatuses: [UNAUTHENTICATED, PERMISSION_DENIED]}, ban: {after: {denials: 3, within: 10m}, durations: [15m, 1h]}}]}`),
		Entry("countResponses on SlidingWindowLog", `{rules: [{name: login, algorithm: SlidingWindowLog, limits: [{requests: 5, period: 15m}], countResponses: {statuses: ["401"]}}]}`),
	)
})
