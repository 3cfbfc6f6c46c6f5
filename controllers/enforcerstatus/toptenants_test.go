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
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
)

func TestTopTenantsAddUpEnforcersOnlyWhenAsked(t *testing.T) {
	g := NewWithT(t)
	p := &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Name: "api"}}
	doc := func(counts ...statusdoc.TenantCount) *statusdoc.Document {
		return &statusdoc.Document{TopTenants: []statusdoc.TopTenants{
			{Policy: "api", Rule: "reads", Heaviest: counts, Refused: counts[:1]},
			{Policy: "other", Rule: "reads", Heaviest: []statusdoc.TenantCount{{Tenant: "x", Count: 99}}},
		}}
	}
	a := doc(statusdoc.TenantCount{Tenant: "carol", Count: 4}, statusdoc.TenantCount{Tenant: "dave", Count: 1})
	b := doc(statusdoc.TenantCount{Tenant: "carol", Count: 3})

	var off topTenants
	off.add(a, p)
	g.Expect(off.status()).To(BeNil(), "off without spec.status.topTenants")

	p.Spec.Status = &v1alpha1.StatusOptions{TopTenants: true}
	var on topTenants
	on.add(a, p)
	on.add(b, p)
	g.Expect(on.status()).To(Equal([]v1alpha1.RuleTopTenants{{Rule: "reads",
		Heaviest: []v1alpha1.TenantCount{{Tenant: "carol", Count: 7}, {Tenant: "dave", Count: 1}},
		Refused:  []v1alpha1.TenantCount{{Tenant: "carol", Count: 7}}}}), "another policy's tenants are not counted")
}
