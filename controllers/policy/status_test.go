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
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/conditions"
	"github.com/sluice-dev/sluice/internal/compile"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 = metav1.NewTime(t0.Add(time.Minute))
)

func newPolicy(generation int64) *v1alpha1.RateLimitPolicy {
	return &v1alpha1.RateLimitPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RateLimitPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "shop", Generation: generation},
		Spec: v1alpha1.RateLimitPolicySpec{Rules: []v1alpha1.Rule{
			{Name: "health", Exempt: true},
			{Name: "api", Algorithm: v1alpha1.AlgorithmTokenBucket},
			{Name: "exports", Algorithm: v1alpha1.AlgorithmSlidingWindowLog},
		}},
	}
}

func secretMissing() *compile.PolicyError {
	return &compile.PolicyError{Policy: "api", Reason: v1alpha1.ReasonStorageSecretMissing, Message: "Secret redis named in spec.storage.secretRef does not exist"}
}

// kstatusOf is what kubectl wait, Flux and Argo CD make of the status.
func kstatusOf(g *WithT, p *v1alpha1.RateLimitPolicy) kstatus.Status {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}

type wantCondition struct {
	status metav1.ConditionStatus
	reason string
}

func conditionsOf(p *v1alpha1.RateLimitPolicy) map[string]wantCondition {
	out := map[string]wantCondition{}
	for _, c := range p.Status.Conditions {
		out[c.Type] = wantCondition{c.Status, c.Reason}
	}
	return out
}

func TestSetPolicyStatus(t *testing.T) {
	tests := []struct {
		name       string
		outcome    compileOutcome
		conditions map[string]wantCondition
		kstatus    kstatus.Status
		event      *conditions.Event
		message    string // of Accepted
	}{{
		name:    "compiled",
		outcome: compileOutcome{},
		conditions: map[string]wantCondition{
			v1alpha1.ConditionAccepted: {metav1.ConditionTrue, v1alpha1.ReasonCompiled},
		},
		kstatus: kstatus.CurrentStatus,
		event:   &conditions.Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.ReasonCompiled, Note: "generation 2 compiled into ConfigMap sluice-enforcer-config"},
		message: "compiled into ConfigMap sluice-enforcer-config",
	}, {
		name:    "storage Secret missing",
		outcome: compileOutcome{Err: secretMissing()},
		conditions: map[string]wantCondition{
			v1alpha1.ConditionAccepted: {metav1.ConditionFalse, v1alpha1.ReasonStorageSecretMissing},
			v1alpha1.ConditionStalled:  {metav1.ConditionTrue, v1alpha1.ReasonStorageSecretMissing},
		},
		kstatus: kstatus.FailedStatus,
		event: &conditions.Event{Type: corev1.EventTypeWarning, Reason: v1alpha1.ReasonStorageSecretMissing,
			Note: "Secret redis named in spec.storage.secretRef does not exist. Nothing of this policy is enforced until then"},
		message: "Secret redis named in spec.storage.secretRef does not exist. Nothing of this policy is enforced until then",
	}, {
		name:    "invalid edit of a published policy",
		outcome: compileOutcome{Err: &compile.PolicyError{Reason: v1alpha1.ReasonInvalidSpec, Message: "the spec cannot be enforced as written: x"}, KeptGeneration: 1},
		conditions: map[string]wantCondition{
			v1alpha1.ConditionAccepted: {metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec},
			v1alpha1.ConditionStalled:  {metav1.ConditionTrue, v1alpha1.ReasonInvalidSpec},
		},
		kstatus: kstatus.FailedStatus,
		event: &conditions.Event{Type: corev1.EventTypeWarning, Reason: v1alpha1.ReasonInvalidSpec,
			Note: "the spec cannot be enforced as written: x. Enforcers keep applying generation 1, the last one accepted"},
		message: "the spec cannot be enforced as written: x. Enforcers keep applying generation 1, the last one accepted",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := newPolicy(2)
			event := setPolicyStatus(p, tt.outcome, t0)

			g.Expect(conditionsOf(p)).To(Equal(tt.conditions))
			g.Expect(event).To(Equal(tt.event))
			if tt.message != "" {
				g.Expect(apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionAccepted).Message).To(Equal(tt.message))
			}
			g.Expect(p.Status.ObservedGeneration).To(BeEquivalentTo(2))
			g.Expect(p.Status.Conditions).To(HaveEach(HaveField("ObservedGeneration", BeEquivalentTo(2))))
			g.Expect(p.Status.Conditions).To(HaveEach(HaveField("LastTransitionTime", Equal(t0))))
			g.Expect(p.Status.Algorithms).To(Equal("TokenBucket,SlidingWindowLog"))
			g.Expect(kstatusOf(g, p)).To(Equal(tt.kstatus))

			again := p.DeepCopy()
			g.Expect(setPolicyStatus(again, tt.outcome, t1)).To(BeNil(), "no Event without a transition")
			g.Expect(again.Status).To(Equal(p.Status), "a second pass changes nothing")
		})
	}
}

func TestSetPolicyStatusTransitions(t *testing.T) {
	g := NewWithT(t)
	p := newPolicy(1)
	setPolicyStatus(p, compileOutcome{Err: secretMissing()}, t0)

	p.Generation = 2 // the Secret is created, then the spec edited
	event := setPolicyStatus(p, compileOutcome{}, t1)
	g.Expect(event).To(Equal(&conditions.Event{Type: corev1.EventTypeNormal, Reason: v1alpha1.ReasonCompiled, Note: "generation 2 compiled into ConfigMap sluice-enforcer-config"}))
	g.Expect(conditionsOf(p)).NotTo(HaveKey(v1alpha1.ConditionStalled), "Stalled is present only while true")
	accepted := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionAccepted)
	g.Expect(accepted.LastTransitionTime).To(Equal(t1))
	g.Expect(accepted.ObservedGeneration).To(BeEquivalentTo(2))

	event = setPolicyStatus(p, compileOutcome{Err: &compile.PolicyError{Reason: v1alpha1.ReasonConfigTooLarge, Message: "too large"}, KeptGeneration: 2}, t1)
	g.Expect(event).To(HaveField("Reason", v1alpha1.ReasonConfigTooLarge))
	event = setPolicyStatus(p, compileOutcome{Err: secretMissing(), KeptGeneration: 2}, t1)
	g.Expect(event).To(HaveField("Reason", v1alpha1.ReasonStorageSecretMissing), "a new reason is a transition too")
}

func TestSetPolicyStatusPublishFailure(t *testing.T) {
	g := NewWithT(t)
	p := newPolicy(1)
	setPolicyStatus(p, compileOutcome{}, t0)
	p.Generation = 2

	event := setPolicyStatus(p, compileOutcome{PublishErr: errors.New("connection refused")}, t1)
	g.Expect(event).To(BeNil())
	g.Expect(conditionsOf(p)).To(HaveKeyWithValue(v1alpha1.ConditionReconciling, wantCondition{metav1.ConditionTrue, v1alpha1.ReasonProgressing}))
	g.Expect(apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReconciling).Message).To(
		Equal("publishing generation 2 to ConfigMap sluice-enforcer-config failed, retrying: connection refused"))
	g.Expect(p.Status.ObservedGeneration).To(BeEquivalentTo(1), "generation 2 is not done yet")
	g.Expect(kstatusOf(g, p)).To(Equal(kstatus.InProgressStatus))

	setPolicyStatus(p, compileOutcome{}, t1)
	g.Expect(conditionsOf(p)).NotTo(HaveKey(v1alpha1.ConditionReconciling), "Reconciling is present only while true")
	g.Expect(kstatusOf(g, p)).To(Equal(kstatus.CurrentStatus))
}

// TestSetPolicyStatusLeavesReady: Ready is the status controller's, which
// follows Accepted; the policy controller neither sets nor removes it.
func TestSetPolicyStatusLeavesReady(t *testing.T) {
	g := NewWithT(t)
	p := newPolicy(2)
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonEnforcersReady,
		Message: "2 of 2 enforcers run generation 1 and reach Redis", ObservedGeneration: 1, LastTransitionTime: t0}
	p.Status.Conditions = []metav1.Condition{ready}
	setPolicyStatus(p, compileOutcome{Err: secretMissing()}, t1)
	g.Expect(apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)).To(HaveValue(Equal(ready)))

	fresh := newPolicy(2)
	setPolicyStatus(fresh, compileOutcome{}, t1)
	g.Expect(conditionsOf(fresh)).NotTo(HaveKey(v1alpha1.ConditionReady))
}

// A policy reading tokens unverified is accepted with a warning that says
// which sources and what to do, and a Warning Event.
func TestSetPolicyStatusWarnsOfUnverifiedTokens(t *testing.T) {
	g := NewWithT(t)
	p := newPolicy(1)
	no := false
	p.Spec.Identity = &v1alpha1.Identity{Sources: []v1alpha1.IdentitySource{
		{JWTClaim: &v1alpha1.JWTClaimSource{Claim: "sub", Verify: &no}}, {ClientIP: &v1alpha1.ClientIPSource{}}}}
	event := setPolicyStatus(p, compileOutcome{}, t0)
	accepted := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionAccepted)
	g.Expect(accepted.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(accepted.Reason).To(Equal(v1alpha1.ReasonCompiledUnverifiedTokens))
	g.Expect(accepted.Message).To(ContainSubstring("spec.identity.sources[0].jwtClaim reads tokens with verify: false"))
	g.Expect(accepted.Message).To(ContainSubstring("Set keys"))
	g.Expect(event).To(HaveField("Type", corev1.EventTypeWarning))
	g.Expect(kstatusOf(g, p)).NotTo(Equal(kstatus.FailedStatus), "a warning, not a failure")

	p.Generation = 2
	p.Spec.Identity.Sources[0].JWTClaim = &v1alpha1.JWTClaimSource{Claim: "sub", Keys: &v1alpha1.JWTKeys{JWKSURL: "https://issuer.example/jwks"}}
	event = setPolicyStatus(p, compileOutcome{}, t1)
	g.Expect(conditionsOf(p)[v1alpha1.ConditionAccepted]).To(Equal(wantCondition{metav1.ConditionTrue, v1alpha1.ReasonCompiled}))
	g.Expect(event).To(HaveField("Type", corev1.EventTypeNormal))
}

// The failure mode in effect is in status, where kubectl get -o wide reads
// it: the spec's, else the manager's --default-failure-mode, else Open.
func TestSetPolicyStatusFailureMode(t *testing.T) {
	g := NewWithT(t)
	p := newPolicy(1)
	setPolicyStatus(p, compileOutcome{}, t0)
	g.Expect(p.Status.FailureMode).To(Equal(v1alpha1.FailureModeOpen), "the default of a manager started without --default-failure-mode")

	setPolicyStatus(p, compileOutcome{DefaultFailureMode: v1alpha1.FailureModeClosed}, t0)
	g.Expect(p.Status.FailureMode).To(Equal(v1alpha1.FailureModeClosed), "the manager's --default-failure-mode")

	p.Spec.FailureMode = v1alpha1.FailureModeLocalFallback
	setPolicyStatus(p, compileOutcome{DefaultFailureMode: v1alpha1.FailureModeClosed}, t0)
	g.Expect(p.Status.FailureMode).To(Equal(v1alpha1.FailureModeLocalFallback), "the spec's own")
}
