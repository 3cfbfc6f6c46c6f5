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

package enforcerstatus

import (
	"slices"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/enforcer/topk"
)

// topTenants gathers the enforcers' top tenants of one policy, by rule.
type topTenants struct {
	heaviest, refused map[string][][]topk.Item
}

// add folds the top tenants of p an enforcer reported.
func (t *topTenants) add(st *statusdoc.Document, p *v1alpha1.RateLimitPolicy) {
	if p.Spec.Status == nil || !p.Spec.Status.TopTenants {
		return
	}
	if t.heaviest == nil {
		t.heaviest, t.refused = map[string][][]topk.Item{}, map[string][][]topk.Item{}
	}
	for _, r := range st.TopTenants {
		if r.Policy == p.Name {
			t.heaviest[r.Rule] = append(t.heaviest[r.Rule], items(r.Heaviest))
			t.refused[r.Rule] = append(t.refused[r.Rule], items(r.Refused))
		}
	}
}

// status is what status.topTenants lists: nil without spec.status.topTenants.
func (t *topTenants) status() []v1alpha1.RuleTopTenants {
	if len(t.heaviest) == 0 {
		return nil
	}
	rules := make([]string, 0, len(t.heaviest))
	for r := range t.heaviest {
		rules = append(rules, r)
	}
	slices.Sort(rules)
	out := make([]v1alpha1.RuleTopTenants, 0, min(len(rules), 64))
	for _, r := range rules[:min(len(rules), 64)] {
		out = append(out, v1alpha1.RuleTopTenants{Rule: r,
			Heaviest: counts(topk.Merge(v1alpha1.TopTenantsPerRule, t.heaviest[r]...)),
			Refused:  counts(topk.Merge(v1alpha1.TopTenantsPerRule, t.refused[r]...))})
	}
	return out
}

func items(in []statusdoc.TenantCount) []topk.Item {
	out := make([]topk.Item, len(in))
	for i, c := range in {
		out[i] = topk.Item{Key: c.Tenant, Count: c.Count, Error: c.Error}
	}
	return out
}

func counts(in []topk.Item) []v1alpha1.TenantCount {
	if len(in) == 0 {
		return nil
	}
	out := make([]v1alpha1.TenantCount, len(in))
	for i, it := range in {
		out[i] = v1alpha1.TenantCount{Tenant: it.Key, Count: it.Count}
	}
	return out
}
