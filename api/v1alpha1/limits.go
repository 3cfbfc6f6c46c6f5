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
	"fmt"
	"slices"
	"strings"
)

// Capacity is the most a tenant can spend at once under the limit: its
// concurrent slots, the burst of a token bucket, which defaults to
// requests, or the requests of a window.
func (l Limit) Capacity() int64 {
	if l.Concurrent > 0 {
		return l.Concurrent
	}
	if l.Burst != nil {
		return *l.Burst
	}
	return l.Requests
}

// LimitsForTier returns the limits of the rule that apply to a request of
// tier: the rule's limits for that tier; if it has none, its limits without a
// tier; if it has none of those either, its limits for defaultTier. The CRD
// guarantees that a rule with limits always yields some for any tier. With
// no tiers configured, pass "" for both.
func (r *Rule) LimitsForTier(tier, defaultTier string) []Limit {
	for _, candidate := range []string{tier, "", defaultTier} {
		if limits := limitsNamingTier(r.Limits, candidate); len(limits) > 0 {
			return limits
		}
	}
	return nil
}

func limitsNamingTier(limits []Limit, tier string) []Limit {
	var out []Limit
	for _, l := range limits {
		if l.Tier == tier {
			out = append(out, l)
		}
	}
	return out
}

// TierNames returns the tiers that the rules' limits name, sorted. A request
// whose tier source yields any other value gets the default tier.
func (s *RateLimitPolicySpec) TierNames() []string {
	var names []string
	for _, rule := range s.Rules {
		for _, l := range rule.Limits {
			if l.Tier != "" && !slices.Contains(names, l.Tier) {
				names = append(names, l.Tier)
			}
		}
	}
	slices.Sort(names)
	return names
}

// Algorithms lists the algorithms of the non-exempt rules, each once, in the
// order of the Algorithm enum, comma-separated: the value of status.algorithms.
func (s *RateLimitPolicySpec) Algorithms() string {
	var used []string
	for _, algorithm := range []Algorithm{AlgorithmTokenBucket, AlgorithmSlidingWindowLog, AlgorithmSlidingWindowCounter, AlgorithmFixedWindow, AlgorithmGCRA, AlgorithmConcurrency} {
		for _, rule := range s.Rules {
			if !rule.Exempt && effectiveAlgorithm(rule.Algorithm) == algorithm {
				used = append(used, string(algorithm))
				break
			}
		}
	}
	return strings.Join(used, ",")
}

func effectiveAlgorithm(a Algorithm) Algorithm {
	if a == "" {
		return DefaultAlgorithm
	}
	return a
}

// ReadySummary is ready/selected, such as 2/3: the value of
// status.enforcers.summary.
func (c EnforcerCounts) ReadySummary() string {
	return fmt.Sprintf("%d/%d", c.Ready, c.Selected)
}
