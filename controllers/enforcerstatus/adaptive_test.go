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
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/conditions"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
)

func adaptivePolicy() *v1alpha1.RateLimitPolicy {
	p := acceptedPolicy()
	p.Spec.Rules[1].Adaptive = &v1alpha1.Adaptive{Target: v1alpha1.AdaptiveTarget{ErrorRate: "5%"}, Minimum: "25%"}
	return p
}

// adaptivePod is a pod whose enforcer read factor (basis points) at at.
func adaptivePod(name string, factor, requests int64, at time.Time) selectedPod {
	st := &statusdoc.Document{Ready: true, Policies: []statusdoc.Policy{{Name: "api", UID: policyUID, Generation: 4,
		Adaptive: []statusdoc.AdaptiveRule{{Rule: "api", Factor: factor, Minimum: 2500, P90Seconds: 0.5, ErrorRate: 0.125,
			Responses: 80, Limits: []statusdoc.AdaptiveLimit{{Requests: requests, Period: "1s"}}, UpdatedAt: &at}}}}}
	return selectedPod{Pod: deploymentPod(name, true), Polled: polledEnforcer{Status: st}}
}

func TestAdaptiveStatusThrottledAndRecovered(t *testing.T) {
	g := NewWithT(t)
	p := adaptivePolicy()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// two replicas: the fresher report wins
	e := setAdaptiveStatus(p, []selectedPod{adaptivePod("a", 7000, 70, at), adaptivePod("b", 4900, 49, at.Add(time.Second))}, t0)
	g.Expect(p.Status.EffectiveLimits).To(Equal([]v1alpha1.EffectiveLimit{{Rule: "api", Factor: "49%", Limits: []string{"49/1s"},
		Latency: "500ms", ErrorRate: "12.5%", Throttled: true}}))
	c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionThrottled)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(c.Reason).To(Equal(v1alpha1.ReasonThrottledByHealth))
	g.Expect(c.Message).To(ContainSubstring("rule api applies 49% of its limits (49/1s)"))
	g.Expect(e).To(Equal(&conditions.Event{Type: corev1.EventTypeWarning, Reason: v1alpha1.ReasonThrottledByHealth, Note: c.Message}))

	idle := adaptivePod("a", 3400, 34, at.Add(2*time.Second))
	idle.Polled.Status.Policies[0].Adaptive[0].Responses = 0
	idle.Polled.Status.Policies[0].Adaptive[0].P90Seconds, idle.Polled.Status.Policies[0].Adaptive[0].ErrorRate = 0, 0
	g.Expect(setAdaptiveStatus(p, []selectedPod{idle}, t0)).To(BeNil(), "still throttled: no new Event")
	g.Expect(p.Status.EffectiveLimits[0].Latency).To(BeEmpty(), "no responses: no latency to report")
	g.Expect(apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionThrottled).Message).
		To(ContainSubstring("rule api applies 34% of its limits (34/1s): no responses in the last interval"))

	e = setAdaptiveStatus(p, []selectedPod{adaptivePod("a", 10000, 100, at.Add(3*time.Second))}, t0)
	c = apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionThrottled)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(v1alpha1.ReasonHealthy))
	g.Expect(e).NotTo(BeNil())
	g.Expect(e.Type).To(Equal(corev1.EventTypeNormal))
	g.Expect(p.Status.EffectiveLimits[0].Throttled).To(BeFalse())
	g.Expect(kstatusOf(g, p)).To(Equal(kstatusOf(g, acceptedPolicy())), "Throttled does not change what kstatus makes of the policy")
}

func TestAdaptiveStatusHealthyFromTheStartAndNoAdaptiveRules(t *testing.T) {
	g := NewWithT(t)
	p := adaptivePolicy()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	g.Expect(setAdaptiveStatus(p, nil, t0)).To(BeNil())
	g.Expect(apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionThrottled)).To(BeNil(), "no report yet: nothing said")
	g.Expect(setAdaptiveStatus(p, []selectedPod{adaptivePod("a", 10000, 100, at)}, t0)).To(BeNil(), "healthy from the start: no Event")
	g.Expect(apimeta.IsStatusConditionFalse(p.Status.Conditions, v1alpha1.ConditionThrottled)).To(BeTrue())

	p.Spec.Rules[1].Adaptive = nil
	g.Expect(setAdaptiveStatus(p, []selectedPod{adaptivePod("a", 10000, 100, at)}, t0)).To(BeNil())
	g.Expect(apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionThrottled)).To(BeNil())
	g.Expect(p.Status.EffectiveLimits).To(BeNil())
}
