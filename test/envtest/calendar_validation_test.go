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

var _ = Describe("RateLimitPolicy calendar limits validation", func() {
	DescribeTable("rejects a calendar limit that cannot be counted, with a message naming the field and the fix",
		expectRefusedAlike,
		Entry("a period and a calendar",
			`{rules: [{name: plan, algorithm: FixedWindow, limits: [{requests: 100, period: 24h, calendar: {unit: Day}}]}]}`,
			"a limit needs exactly one of period (a duration such as 1h) or calendar"),
		Entry("neither a period nor a calendar",
			`{rules: [{name: plan, algorithm: FixedWindow, limits: [{requests: 100}]}]}`,
			"a limit needs exactly one of period (a duration such as 1h) or calendar"),
		Entry("a calendar on the default TokenBucket",
			`{rules: [{name: plan, limits: [{requests: 100, calendar: {unit: Month}}]}]}`,
			"rule plan uses TokenBucket, which cannot count calendar windows exactly: set algorithm to FixedWindow"),
		Entry("a calendar on SlidingWindowCounter",
			`{rules: [{name: plan, algorithm: SlidingWindowCounter, limits: [{requests: 100, calendar: {unit: Day}}]}]}`,
			"rule plan uses SlidingWindowCounter, which cannot count calendar windows exactly"),
		Entry("a calendar on GCRA",
			`{rules: [{name: plan, algorithm: GCRA, limits: [{requests: 100, calendar: {unit: Day}}]}]}`,
			"rule plan uses GCRA, which cannot count calendar windows exactly"),
		Entry("a zone that is not a zone name",
			`{rules: [{name: plan, algorithm: FixedWindow, limits: [{requests: 100, calendar: {unit: Month, timeZone: "Europe/Berlin; DROP"}}]}]}`,
			"timeZone must be an IANA time zone name such as Europe/Berlin"),
		Entry("a zone given as a path",
			`{rules: [{name: plan, algorithm: FixedWindow, limits: [{requests: 100, calendar: {unit: Month, timeZone: /etc/localtime}}]}]}`,
			"timeZone must be an IANA time zone name such as Europe/Berlin"),
		Entry("an unknown unit",
			`{rules: [{name: plan, algorithm: FixedWindow, limits: [{requests: 100, calendar: {unit: Fortnight}}]}]}`,
			`supported values: "Day", "Week", "Month", "Year"`),
		Entry("weekStart on a month",
			`{rules: [{name: plan, algorithm: FixedWindow, limits: [{requests: 100, calendar: {unit: Month, weekStart: Sunday}}]}]}`,
			"weekStart is for unit Week only"),
		Entry("two limits of one calendar unit",
			`{rules: [{name: plan, algorithm: FixedWindow, limits: [{requests: 100, calendar: {unit: Day}}, {requests: 200, calendar: {unit: Day, timeZone: Europe/Berlin}}]}]}`,
			"rule plan has two limits for the same tier and calendar unit"),
	)

	DescribeTable("accepts calendar limits on FixedWindow rules",
		expectAcceptedAlike,
		Entry("a monthly plan quota in Berlin",
			`{rules: [{name: plan, algorithm: FixedWindow, limits: [{requests: 10000, calendar: {unit: Month, timeZone: Europe/Berlin}}]}]}`),
		Entry("a daily and a monthly quota with a per-minute limit on one rule",
			`{rules: [{name: plan, algorithm: FixedWindow, limits: [{requests: 60, period: 1m}, {requests: 1000, calendar: {unit: Day, timeZone: America/New_York}}, {requests: 20000, calendar: {unit: Month, timeZone: America/New_York}}]}]}`),
		Entry("a week from Sunday, and a year in UTC",
			`{rules: [{name: plan, algorithm: FixedWindow, limits: [{requests: 500, calendar: {unit: Week, weekStart: Sunday, timeZone: America/Los_Angeles}}, {requests: 100000, calendar: {unit: Year}}]}]}`),
		Entry("tiers with calendars and a calendar override",
			`{tiers: {source: {header: {name: X-Plan}}, default: free}, rules: [{name: plan, algorithm: FixedWindow, limits: [{tier: free, requests: 1000, calendar: {unit: Month}}, {tier: pro, requests: 100000, calendar: {unit: Month}}]}], overrides: [{tenant: acme, rule: plan, limits: [{requests: 500000, calendar: {unit: Month, timeZone: Etc/GMT+5}}]}]}`),
	)
})
