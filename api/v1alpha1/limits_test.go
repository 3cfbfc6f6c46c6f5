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

package v1alpha1

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func limit(tier string, requests int64, period time.Duration) Limit {
	return Limit{Tier: tier, Requests: requests, Period: metav1.Duration{Duration: period}}
}

func TestLimitCapacity(t *testing.T) {
	g := NewWithT(t)
	burst := int64(10)

	g.Expect(Limit{Requests: 60}.Capacity()).To(BeEquivalentTo(60), "burst defaults to requests")
	g.Expect(Limit{Requests: 60, Burst: &burst}.Capacity()).To(BeEquivalentTo(10))
}

func TestRuleLimitsForTier(t *testing.T) {
	free := limit("free", 100, time.Hour)
	premium := limit("premium", 5000, time.Hour)
	premiumDaily := limit("premium", 50000, 24*time.Hour)
	everyone := limit("", 1000, time.Hour)

	tests := []struct {
		name        string
		limits      []Limit
		tier        string
		defaultTier string
		want        []Limit
	}{
		{"untiered rule without tiers", []Limit{everyone}, "", "", []Limit{everyone}},
		{"tier with its own limits", []Limit{free, premium, premiumDaily}, "premium", "free", []Limit{premium, premiumDaily}},
		{"own limits replace untiered ones", []Limit{everyone, premium}, "premium", "free", []Limit{premium}},
		{"tier the rule does not name falls back to untiered", []Limit{everyone, premium}, "basic", "free", []Limit{everyone}},
		{"untiered before default tier", []Limit{everyone, free}, "basic", "free", []Limit{everyone}},
		{"tier the rule does not name falls back to default tier", []Limit{free, premium}, "basic", "free", []Limit{free}},
		{"untiered rule applies to every tier", []Limit{everyone}, "premium", "free", []Limit{everyone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			rule := Rule{Name: "r", Limits: tt.limits}
			g.Expect(rule.LimitsForTier(tt.tier, tt.defaultTier)).To(Equal(tt.want))
		})
	}
}

func TestSpecTierNames(t *testing.T) {
	g := NewWithT(t)
	spec := RateLimitPolicySpec{Rules: []Rule{
		{Name: "plans", Limits: []Limit{limit("premium", 5000, time.Hour), limit("free", 100, time.Hour)}},
		{Name: "exports", Limits: []Limit{limit("", 10, time.Minute), limit("premium", 50, time.Minute)}},
		{Name: "health", Exempt: true},
	}}

	g.Expect(spec.TierNames()).To(Equal([]string{"free", "premium"}))
	g.Expect((&RateLimitPolicySpec{}).TierNames()).To(BeEmpty())
}

func TestSpecAlgorithms(t *testing.T) {
	tests := []struct {
		name  string
		rules []Rule
		want  string
	}{
		{"unset algorithm is TokenBucket", []Rule{{Name: "api"}}, "TokenBucket"},
		{"each once, in enum order", []Rule{
			{Name: "a", Algorithm: AlgorithmFixedWindow},
			{Name: "b", Algorithm: AlgorithmSlidingWindowLog},
			{Name: "c", Algorithm: AlgorithmFixedWindow},
			{Name: "d", Algorithm: AlgorithmTokenBucket},
		}, "TokenBucket,SlidingWindowLog,FixedWindow"},
		{"exempt rules do not count", []Rule{
			{Name: "health", Exempt: true, Algorithm: AlgorithmTokenBucket},
			{Name: "api", Algorithm: AlgorithmSlidingWindowCounter},
		}, "SlidingWindowCounter"},
		{"only exempt rules", []Rule{{Name: "health", Exempt: true}}, ""},
		{"GCRA comes last", []Rule{{Name: "a", Algorithm: AlgorithmGCRA}, {Name: "b"}}, "TokenBucket,GCRA"},
		{"Concurrency after the rates", []Rule{{Name: "a", Algorithm: AlgorithmConcurrency}, {Name: "b", Algorithm: AlgorithmGCRA}}, "GCRA,Concurrency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := RateLimitPolicySpec{Rules: tt.rules}
			g.Expect(spec.Algorithms()).To(Equal(tt.want))
		})
	}
}

func TestEnforcerCountsReadySummary(t *testing.T) {
	g := NewWithT(t)
	g.Expect(EnforcerCounts{Selected: 3, Injected: 3, Ready: 2}.ReadySummary()).To(Equal("2/3"))
	g.Expect(EnforcerCounts{}.ReadySummary()).To(Equal("0/0"))
}
