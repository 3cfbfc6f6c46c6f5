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
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/conditions"
	"github.com/sluice-dev/sluice/enforcer/config"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
)

// setAdaptiveStatus writes status.effectiveLimits and the Throttled
// condition of a policy with adaptive rules from its enforcers' reports
// (every replica reads one shared factor; the freshest report wins), and
// returns the Event of a Throttled transition, or nil. A policy without
// adaptive rules has neither.
func setAdaptiveStatus(p *v1alpha1.RateLimitPolicy, pods []selectedPod, now metav1.Time) *conditions.Event {
	var rules []string
	for _, r := range p.Spec.Rules {
		if r.Adaptive != nil && !r.Exempt {
			rules = append(rules, r.Name)
		}
	}
	if len(rules) == 0 {
		p.Status.EffectiveLimits = nil
		apimeta.RemoveStatusCondition(&p.Status.Conditions, v1alpha1.ConditionThrottled)
		return nil
	}
	latest := latestAdaptive(p, pods)
	var limits []v1alpha1.EffectiveLimit
	var throttled []string
	for _, name := range rules {
		a, ok := latest[name]
		if !ok {
			continue
		}
		e := v1alpha1.EffectiveLimit{Rule: name, Factor: config.BasisPoints(a.Factor).String(), Throttled: a.Factor < int64(config.Full)}
		measured := "no responses in the last interval"
		if a.Responses > 0 { // an interval without responses has no latency or error rate
			e.Latency, e.ErrorRate = (time.Duration(a.P90Seconds * float64(time.Second))).String(), percentOf(a.ErrorRate)
			measured = fmt.Sprintf("p90 latency %s, 5xx %s in the last interval", e.Latency, e.ErrorRate)
		}
		for _, l := range a.Limits {
			e.Limits = append(e.Limits, strconv.FormatInt(l.Requests, 10)+"/"+l.Period)
		}
		limits = append(limits, e)
		if e.Throttled {
			throttled = append(throttled, fmt.Sprintf("rule %s applies %s of its limits (%s): %s",
				name, e.Factor, strings.Join(e.Limits, ", "), measured))
		}
	}
	if len(limits) == 0 {
		return nil // no enforcer has reported yet: nothing new is known
	}
	p.Status.EffectiveLimits = limits
	var before *metav1.Condition
	if c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionThrottled); c != nil {
		before = c.DeepCopy()
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionThrottled, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonHealthy,
		Message: "The application is within its adaptive targets: every adaptive rule applies its limits in full.", ObservedGeneration: p.Generation,
		LastTransitionTime: now}
	if len(throttled) > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonThrottledByHealth
		cond.Message = limitMessage("The application is over an adaptive target, so limits are scaled down until it recovers: " +
			strings.Join(throttled, "; ") + ".")
	}
	apimeta.SetStatusCondition(&p.Status.Conditions, cond)
	if before != nil && before.Status == cond.Status {
		return nil
	}
	if before == nil && cond.Status == metav1.ConditionFalse {
		return nil // healthy from the start: nothing happened
	}
	eventType := corev1.EventTypeWarning
	if cond.Status == metav1.ConditionFalse {
		eventType = corev1.EventTypeNormal
	}
	return &conditions.Event{Type: eventType, Reason: cond.Reason, Note: cond.Message}
}

// latestAdaptive is the freshest report of each adaptive rule of p among
// the enforcers that run p's current generation.
func latestAdaptive(p *v1alpha1.RateLimitPolicy, pods []selectedPod) map[string]statusdoc.AdaptiveRule {
	out := map[string]statusdoc.AdaptiveRule{}
	at := map[string]time.Time{}
	for _, sp := range pods {
		st := sp.Polled.Status
		if st == nil {
			continue
		}
		loaded := loadedPolicy(st, p)
		if loaded == nil || loaded.Generation != p.Generation {
			continue
		}
		for _, a := range loaded.Adaptive {
			if a.UpdatedAt == nil {
				continue
			}
			if prev, ok := at[a.Rule]; ok && !a.UpdatedAt.After(prev) {
				continue
			}
			out[a.Rule], at[a.Rule] = a, *a.UpdatedAt
		}
	}
	return out
}

// percentOf writes a share (0..1) as a percentage with one decimal.
func percentOf(share float64) string {
	s := strconv.FormatFloat(share*100, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + "%"
}
