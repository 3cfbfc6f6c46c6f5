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

package policy

import (
	"cmp"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/conditions"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// compileOutcome is what one pass of the policy controller found out about
// one policy: the input of its status.
type compileOutcome struct {
	// Err says why the policy did not compile; nil when it did.
	Err *compile.PolicyError
	// KeptGeneration is the generation the enforcers keep applying when Err
	// is set: the last one that compiled, 0 if none did.
	KeptGeneration int64
	// PublishErr is a transient failure to write the ConfigMap.
	PublishErr error
	// DefaultFailureMode is the manager's, for a spec that sets none.
	DefaultFailureMode v1alpha1.FailureMode
}

// setPolicyStatus computes the whole status the policy controller owns
// (conditions.Policy) and returns the Event of an Accepted transition, or
// nil. Ready is the status controller's, which follows Accepted.
func setPolicyStatus(p *v1alpha1.RateLimitPolicy, o compileOutcome, now metav1.Time) *conditions.Event {
	if o.PublishErr != nil {
		// Nothing new is known about the spec: say why it is not published
		// yet and leave the rest for the retry.
		setReconcilingCondition(p, o.PublishErr, now)
		return nil
	}
	var before *metav1.Condition
	if c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionAccepted); c != nil {
		before = c.DeepCopy() // setting the condition updates it in place
	}
	setAcceptedCondition(p, o, now)
	setStalledCondition(p, o.Err, now)
	setReconcilingCondition(p, nil, now)
	p.Status.Algorithms = p.Spec.Algorithms()
	// as the compiler chooses it (compile.Options.DefaultFailureMode)
	p.Status.FailureMode = cmp.Or(p.Spec.FailureMode, o.DefaultFailureMode, v1alpha1.DefaultFailureMode)
	p.Status.ObservedGeneration = p.Generation
	return acceptedEvent(before, apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionAccepted))
}

// setAcceptedCondition says whether the current generation compiled.
func setAcceptedCondition(p *v1alpha1.RateLimitPolicy, o compileOutcome, now metav1.Time) {
	cond := metav1.Condition{
		Type:               v1alpha1.ConditionAccepted,
		Status:             metav1.ConditionTrue,
		Reason:             v1alpha1.ReasonCompiled,
		Message:            fmt.Sprintf("compiled into ConfigMap %s", configMapOf(p)),
		ObservedGeneration: p.Generation,
		LastTransitionTime: now,
	}
	if unverified := p.Spec.UnverifiedJWTClaims(); o.Err == nil && len(unverified) > 0 {
		cond.Reason = v1alpha1.ReasonCompiledUnverifiedTokens
		cond.Message += fmt.Sprintf(", but %s reads tokens with verify: false: any client can write its own token and name its tenant or tier. "+
			"Set keys to the issuer's JSON Web Key Set, unless a gateway in front verifies every token", strings.Join(unverified, " and "))
	}
	if o.Err != nil {
		cond.Status = metav1.ConditionFalse
		cond.Reason = o.Err.Reason
		cond.Message = o.Err.Message
		if o.KeptGeneration > 0 {
			cond.Message += fmt.Sprintf(". Enforcers keep applying generation %d, the last one accepted", o.KeptGeneration)
		} else {
			cond.Message += ". Nothing of this policy is enforced until then"
		}
	}
	apimeta.SetStatusCondition(&p.Status.Conditions, cond)
}

// setStalledCondition is present, True, only while the spec needs a change
// by the user (kstatus reports the policy as Failed).
func setStalledCondition(p *v1alpha1.RateLimitPolicy, err *compile.PolicyError, now metav1.Time) {
	if err == nil {
		apimeta.RemoveStatusCondition(&p.Status.Conditions, v1alpha1.ConditionStalled)
		return
	}
	apimeta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
		Type:               v1alpha1.ConditionStalled,
		Status:             metav1.ConditionTrue,
		Reason:             err.Reason,
		Message:            err.Message,
		ObservedGeneration: p.Generation,
		LastTransitionTime: now,
	})
}

// setReconcilingCondition is present, True, only while publishing the
// current generation failed and is being retried.
func setReconcilingCondition(p *v1alpha1.RateLimitPolicy, publishErr error, now metav1.Time) {
	if publishErr == nil {
		apimeta.RemoveStatusCondition(&p.Status.Conditions, v1alpha1.ConditionReconciling)
		return
	}
	apimeta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
		Type:               v1alpha1.ConditionReconciling,
		Status:             metav1.ConditionTrue,
		Reason:             v1alpha1.ReasonProgressing,
		Message:            fmt.Sprintf("publishing generation %d to ConfigMap %s failed, retrying: %v", p.Generation, configMapOf(p), publishErr),
		ObservedGeneration: p.Generation,
		LastTransitionTime: now,
	})
}

// acceptedEvent returns the Event for a change of Accepted's status or
// reason (including its first setting), nil when it did not change.
func acceptedEvent(before, after *metav1.Condition) *conditions.Event {
	if after == nil || (before != nil && before.Status == after.Status && before.Reason == after.Reason) {
		return nil
	}
	if after.Status == metav1.ConditionTrue && after.Reason != v1alpha1.ReasonCompiledUnverifiedTokens {
		return &conditions.Event{Type: corev1.EventTypeNormal, Reason: after.Reason,
			Note: fmt.Sprintf("generation %d %s", after.ObservedGeneration, after.Message)}
	}
	return &conditions.Event{Type: corev1.EventTypeWarning, Reason: after.Reason, Note: after.Message}
}

// configMapOf names the ConfigMap that publishes the policy: the rate limit
// service's for a rateLimitService policy, else the enforcers'.
func configMapOf(p *v1alpha1.RateLimitPolicy) string {
	if compile.IsRateLimitService(*p) {
		return wellknown.ServiceConfigMapName
	}
	return wellknown.ConfigMapName
}
