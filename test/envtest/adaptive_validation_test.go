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

// adaptiveRule is a rule with the given adaptive settings.
func adaptiveRule(adaptive string) string {
	return `{rules: [{name: api, limits: [{requests: 100, period: 1s}], adaptive: ` + adaptive + `}]}`
}

var _ = Describe("RateLimitPolicy adaptive validation", func() {
	DescribeTable("rejects invalid adaptive settings with a message that says what to fix",
		expectRefusedAlike,
		Entry("no target", adaptiveRule(`{target: {}}`), "adaptive.target needs latency, errorRate or both"),
		Entry("latency that is not a duration", adaptiveRule(`{target: {latency: fast}}`), "adaptive.target.latency must be a duration"),
		Entry("latency above 60s", adaptiveRule(`{target: {latency: 2m}}`), "adaptive.target.latency must be between 1ms and 60s"),
		Entry("latency below 1ms", adaptiveRule(`{target: {latency: 500us}}`), "adaptive.target.latency must be between 1ms and 60s"),
		Entry("error rate without %", adaptiveRule(`{target: {errorRate: "5"}}`), "adaptive.target.errorRate must be a percentage"),
		Entry("error rate below 0.1%", adaptiveRule(`{target: {errorRate: 0.05%}}`), "adaptive.target.errorRate must be between 0.1% and 100%"),
		Entry("error rate above 100%", adaptiveRule(`{target: {errorRate: 150%}}`), "adaptive.target.errorRate must be between 0.1% and 100%"),
		Entry("minimum that is not a percentage", adaptiveRule(`{target: {latency: 250ms}, minimum: quarter}`), "adaptive.minimum must be a percentage such as 25%"),
		Entry("minimum of 0%", adaptiveRule(`{target: {latency: 250ms}, minimum: 0%}`), "adaptive.minimum must be between 1% and 100%"),
		Entry("minimum above 100%", adaptiveRule(`{target: {latency: 250ms}, minimum: 101%}`), "adaptive.minimum must be between 1% and 100%"),
		Entry("interval below 1s", adaptiveRule(`{target: {latency: 250ms}, interval: 500ms}`), "adaptive.interval must be a whole number of seconds between 1s and 10m"),
		Entry("interval above 10m", adaptiveRule(`{target: {latency: 250ms}, interval: 1h}`), "adaptive.interval must be a whole number of seconds between 1s and 10m"),
		Entry("an exempt adaptive rule",
			`{rules: [{name: health, exempt: true, adaptive: {target: {latency: 250ms}}}, {name: api, limits: [{requests: 1, period: 1s}]}]}`,
			"rule health is exempt, so it has no limits to adapt"),
	)

	DescribeTable("accepts valid adaptive settings",
		expectAcceptedAlike,
		Entry("the issue's example", adaptiveRule(`{target: {latency: 250ms, errorRate: 5%}, minimum: 25%}`)),
		Entry("latency only, with the defaults", adaptiveRule(`{target: {latency: 1s}}`)),
		Entry("the bounds", adaptiveRule(`{target: {latency: 60s, errorRate: 0.1%}, minimum: 100%, interval: 10m}`)),
		Entry("the other bounds", adaptiveRule(`{target: {latency: 1ms, errorRate: 100%}, minimum: 1%, interval: 1s}`)),
	)
})
