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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sluicev1alpha1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

var _ = Describe("Adaptive status", func() {
	It("stores effectiveLimits and the Throttled condition, and defaults adaptive's minimum and interval", func() {
		policy := &sluicev1alpha1.RateLimitPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "adaptive-status", Namespace: namespace},
			Spec: sluicev1alpha1.RateLimitPolicySpec{
				Selector:     metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
				UpstreamPort: 8080,
				Rules: []sluicev1alpha1.Rule{{
					Name:     "api",
					Limits:   []sluicev1alpha1.Limit{{Requests: 100, Period: metav1.Duration{Duration: time.Second}}},
					Adaptive: &sluicev1alpha1.Adaptive{Target: sluicev1alpha1.AdaptiveTarget{ErrorRate: "5%"}},
				}},
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Expect(policy.Spec.Rules[0].Adaptive.Minimum).To(Equal("25%"))
		Expect(policy.Spec.Rules[0].Adaptive.Interval).To(Equal(&metav1.Duration{Duration: 10 * time.Second}))

		policy.Status.EffectiveLimits = []sluicev1alpha1.EffectiveLimit{{Rule: "api", Factor: "49%", Limits: []string{"49/1s"},
			Latency: "500ms", ErrorRate: "7.5%", Throttled: true}}
		meta.SetStatusCondition(&policy.Status.Conditions, metav1.Condition{
			Type: sluicev1alpha1.ConditionThrottled, Status: metav1.ConditionTrue, Reason: sluicev1alpha1.ReasonThrottledByHealth,
			Message: "rule api applies 49% of its limits", ObservedGeneration: policy.Generation,
		})
		Expect(k8sClient.Status().Update(ctx, policy)).To(Succeed())

		stored := &sluicev1alpha1.RateLimitPolicy{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), stored)).To(Succeed())
		Expect(stored.Status.EffectiveLimits).To(Equal(policy.Status.EffectiveLimits))
		Expect(meta.IsStatusConditionTrue(stored.Status.Conditions, sluicev1alpha1.ConditionThrottled)).To(BeTrue())
	})
})
