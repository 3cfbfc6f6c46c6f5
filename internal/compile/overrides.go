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
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// maxOverrideProblems is how many override problems one message names: a
// condition message holds at most 32 KiB, and 10,000 overrides may all be
// wrong alike.
const maxOverrideProblems = 5

// maxLogRequests is the most requests per period a SlidingWindowLog limit
// allows, as the CRD bounds the rules' own limits.
const maxLogRequests = 100000

// checkOverrides relates every override of a defaulted spec to the rule it
// names and to the others. The CRD checks each override alone; relating
// 10,000 overrides to 64 rules, or to each other, is beyond the cost budget
// of the API server's validation rules, so this runs here, in one pass.
func checkOverrides(p *v1alpha1.RateLimitPolicy, spec *v1alpha1.RateLimitPolicySpec) error {
	rules := make(map[string]*v1alpha1.Rule, len(spec.Rules))
	for i := range spec.Rules {
		rules[spec.Rules[i].Name] = &spec.Rules[i]
	}
	type key struct{ tenant, rule string }
	seen := make(map[key]int, len(spec.Overrides))
	var problems []string
	count := 0
	for i := range spec.Overrides {
		o := &spec.Overrides[i]
		msg := overrideProblem(o, rules[o.Rule])
		if first, dup := seen[key{o.Tenant, o.Rule}]; dup {
			msg = fmt.Sprintf("spec.overrides[%d] is also for tenant %s and rule %s: keep one override per tenant and rule", first, o.Tenant, o.Rule)
		} else {
			seen[key{o.Tenant, o.Rule}] = i
		}
		if msg == "" {
			continue
		}
		if count++; count <= maxOverrideProblems {
			problems = append(problems, fmt.Sprintf("spec.overrides[%d](%s): %s", i, o.Tenant, msg))
		}
	}
	if count == 0 {
		return nil
	}
	if count > maxOverrideProblems {
		problems = append(problems, fmt.Sprintf("and %d more overrides", count-maxOverrideProblems))
	}
	return &PolicyError{Policy: p.Name, Reason: v1alpha1.ReasonInvalidSpec, Message: strings.Join(problems, "; ")}
}

// overrideProblem says what is wrong with override o of rule r (nil when
// no rule has its name), "" when nothing is.
func overrideProblem(o *v1alpha1.Override, r *v1alpha1.Rule) string {
	switch {
	case r == nil:
		return fmt.Sprintf("an override names rule %s, which does not exist: use the name of a rule in spec.rules", o.Rule)
	case r.Exempt:
		return fmt.Sprintf("an override names rule %s, which is exempt and never limits requests: remove the override, or set exempt to false on the rule", o.Rule)
	}
	bucket := r.Algorithm == v1alpha1.AlgorithmTokenBucket || r.Algorithm == v1alpha1.AlgorithmGCRA
	capacity := int64(-1) // the least a limit allows at once; -1: not comparable
	for _, l := range o.Limits {
		switch {
		case l.Burst != nil && !bucket:
			return fmt.Sprintf("an override of rule %s sets burst, which only applies to TokenBucket and GCRA rules: remove burst from its limits", o.Rule)
		case l.Calendar != nil && r.Algorithm != v1alpha1.AlgorithmFixedWindow:
			return "an override has a calendar limit, but its rule does not use FixedWindow, the only algorithm that counts calendar windows exactly: " +
				"give the override's limits a period, or set algorithm FixedWindow on the rule"
		case r.Algorithm == v1alpha1.AlgorithmSlidingWindowLog && l.Requests > maxLogRequests:
			return fmt.Sprintf("an override of rule %s allows more than %d requests per period, but the rule uses SlidingWindowLog, which stores one entry per request: "+
				"lower the limit, or use SlidingWindowCounter on the rule", o.Rule, maxLogRequests)
		}
		capacity = leastCapacity(capacity, l)
	}
	if capacity > 0 && int64(r.Cost) > capacity {
		return fmt.Sprintf("an override of rule %s has a limit that allows fewer requests per period (burst, or requests when burst is unset) than the cost of the rule, "+
			"so no request of that tenant could ever pass: raise the limit or lower the cost", o.Rule)
	}
	return ""
}

// leastCapacity folds limit l into the least number of requests the limits
// so far allow at once (burst, else requests). A limit without requests
// (Concurrency) or with an invalid one makes the comparison moot: the
// compiled configuration's own checks report those.
func leastCapacity(least int64, l v1alpha1.Limit) int64 {
	if least == 0 || l.Requests < 1 || (l.Burst != nil && *l.Burst < 1) {
		return 0
	}
	c := l.Requests
	if l.Burst != nil {
		c = *l.Burst
	}
	if least < 0 || c < least {
		return c
	}
	return least
}
