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
)

var _ = Describe("RateLimitPolicy onLimit.delay validation", func() {
	DescribeTable("rejects a delay that cannot be exact, with a message naming the rule",
		expectRefusedAlike,
		Entry("on SlidingWindowLog",
			`{rules: [{name: search, algorithm: SlidingWindowLog, limits: [{requests: 20, period: 1s}], onLimit: {delay: {max: 500ms}}}]}`,
			"rule search uses SlidingWindowLog, which cannot book future capacity exactly"),
		Entry("on SlidingWindowCounter",
			`{rules: [{name: search, algorithm: SlidingWindowCounter, limits: [{requests: 20, period: 1s}], onLimit: {delay: {max: 500ms}}}]}`,
			"rule search uses SlidingWindowCounter, which cannot book future capacity exactly"),
		Entry("on FixedWindow",
			`{rules: [{name: search, algorithm: FixedWindow, limits: [{requests: 20, period: 1s}], onLimit: {delay: {max: 500ms}}}]}`,
			"rule search uses FixedWindow, which cannot book future capacity exactly"),
		Entry("on an exempt rule",
			`{rules: [`+apiRule+`, {name: health, exempt: true, onLimit: {delay: {max: 500ms}}}]}`,
			"rule health is exempt: its requests are never limited, so onLimit.delay has nothing to delay"),
		Entry("a max above 30s", `{rules: [{name: search, limits: [{requests: 20, period: 1s}], onLimit: {delay: {max: 1m}}}]}`,
			"max must be between 1ms and 30s"),
		Entry("a max below 1ms", `{rules: [{name: search, limits: [{requests: 20, period: 1s}], onLimit: {delay: {max: 500us}}}]}`,
			"max must be between 1ms and 30s"),
		Entry("a max that is not a duration", `{rules: [{name: search, limits: [{requests: 20, period: 1s}], onLimit: {delay: {max: soon}}}]}`,
			"max must be a duration such as 250ms or 2s"),
		Entry("a maxQueued of 0", `{rules: [{name: search, limits: [{requests: 20, period: 1s}], onLimit: {delay: {max: 500ms, maxQueued: 0}}}]}`,
			"maxQueued"),
	)

	DescribeTable("accepts a delay on the algorithms that book exactly",
		expectAcceptedAlike,
		Entry("TokenBucket, the default algorithm",
			`{rules: [{name: search, limits: [{requests: 20, period: 1s, burst: 20}], onLimit: {delay: {max: 500ms}}}]}`),
		Entry("GCRA with a queue bound",
			`{rules: [{name: search, algorithm: GCRA, limits: [{requests: 20, period: 1s}, {requests: 1000, period: 1h}], onLimit: {delay: {max: 2s, maxQueued: 10}}}]}`),
		Entry("an onLimit without delay", `{rules: [{name: search, limits: [{requests: 20, period: 1s}], onLimit: {}}]}`),
	)
})
