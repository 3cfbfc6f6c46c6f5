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

package controllers

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

var _ = Describe("The policy controller with calendar limits", func() {
	It("refuses an unknown time zone in Accepted, naming it, and publishes the policy once it is fixed", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		policy := samplePolicy("ratelimitpolicy_login_protection.yaml", ns)
		policy.Spec.Rules[0].Algorithm = v1alpha1.AlgorithmFixedWindow
		policy.Spec.Rules[0].Limits = []v1alpha1.Limit{{Requests: 10000,
			Calendar: &v1alpha1.Calendar{Unit: v1alpha1.CalendarMonth, TimeZone: "Europe/Berlim"}}}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed(), "the zone has the shape of a zone name: the API server admits it")

		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionAccepted) }).
			Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec, 1))
		Expect(condition(ctx, policy, v1alpha1.ConditionAccepted).Message).
			To(ContainSubstring(`limits[0].calendar.timeZone: time zone "Europe/Berlim" is not a known IANA time zone name`))
		Expect(publishedPolicies(ctx, ns)).NotTo(HaveKey(policy.Name))

		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8sClient.Get(ctx, key(policy), policy); err != nil {
				return err
			}
			policy.Spec.Rules[0].Limits[0].Calendar.TimeZone = "Europe/Berlin"
			return k8sClient.Update(ctx, policy)
		})).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionAccepted) }).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCompiled, 2))
		Eventually(func() bool {
			p, ok := publishedPolicies(ctx, ns)[policy.Name]
			return ok && p.Rules[0].Limits[0].Calendar != nil && p.Rules[0].Limits[0].Calendar.Label() == "month@Europe/Berlin"
		}).Should(BeTrue(), "the compiled configuration carries the calendar")
	})
})
