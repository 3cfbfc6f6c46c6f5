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

package conditions

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

func condition(t, status, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: reason, ObservedGeneration: 1,
		LastTransitionTime: metav1.Now().Rfc3339Copy()}
}

// stored is a policy as both controllers left it: accepted, its enforcers
// ready, its adaptive rules throttled.
func stored() *v1alpha1.RateLimitPolicy {
	p := &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "shop", Generation: 1}}
	p.Status.ObservedGeneration = 1
	p.Status.Enforcers = v1alpha1.EnforcerCounts{Selected: 2, Injected: 2, Ready: 2, UpToDate: 2}
	p.Status.Conditions = []metav1.Condition{
		condition(v1alpha1.ConditionAccepted, "True", v1alpha1.ReasonCompiled),
		condition(v1alpha1.ConditionReady, "True", v1alpha1.ReasonEnforcersReady),
		condition(v1alpha1.ConditionThrottled, "True", v1alpha1.ReasonThrottledByHealth),
	}
	return p
}

func patchTestClient(g *WithT, objs ...client.Object) client.Client {
	scheme := runtime.NewScheme()
	g.Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.RateLimitPolicy{}).Build()
}

func read(ctx context.Context, g *WithT, c client.Client) *v1alpha1.RateLimitPolicy {
	p := &v1alpha1.RateLimitPolicy{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "api"}, p)).To(Succeed())
	return p
}

func reasons(p *v1alpha1.RateLimitPolicy) map[string]string {
	out := map[string]string{}
	for _, c := range p.Status.Conditions {
		out[c.Type] = c.Reason
	}
	return out
}

// TestPatchWritesOnlyOwnedConditions: whatever a controller does to a
// condition it does not own, the user sees the owner's: the policy
// controller that refuses a new generation cannot turn Ready off or drop
// Throttled, and the status controller cannot touch Accepted.
func TestPatchWritesOnlyOwnedConditions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := patchTestClient(g, stored())

	p := read(ctx, g, c)
	patch := NewPatch(Policy, []*v1alpha1.RateLimitPolicy{p})
	apimeta.SetStatusCondition(&p.Status.Conditions, condition(v1alpha1.ConditionAccepted, "False", v1alpha1.ReasonInvalidSpec))
	apimeta.SetStatusCondition(&p.Status.Conditions, condition(v1alpha1.ConditionStalled, "True", v1alpha1.ReasonInvalidSpec))
	// Not the policy controller's to write:
	apimeta.SetStatusCondition(&p.Status.Conditions, condition(v1alpha1.ConditionReady, "False", v1alpha1.ReasonNotAccepted))
	apimeta.RemoveStatusCondition(&p.Status.Conditions, v1alpha1.ConditionThrottled)
	p.Status.Enforcers = v1alpha1.EnforcerCounts{}
	conflict, err := patch.Apply(ctx, c, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conflict).To(BeFalse())

	saved := read(ctx, g, c)
	g.Expect(reasons(saved)).To(Equal(map[string]string{
		v1alpha1.ConditionAccepted:  v1alpha1.ReasonInvalidSpec,
		v1alpha1.ConditionStalled:   v1alpha1.ReasonInvalidSpec,
		v1alpha1.ConditionReady:     v1alpha1.ReasonEnforcersReady,
		v1alpha1.ConditionThrottled: v1alpha1.ReasonThrottledByHealth,
	}), "the status controller's Ready and Throttled survive")
	g.Expect(saved.Status.Enforcers.Ready).To(BeEquivalentTo(2), "and so do its counts")

	p = read(ctx, g, c)
	patch = NewPatch(EnforcerStatus, []*v1alpha1.RateLimitPolicy{p})
	apimeta.RemoveStatusCondition(&p.Status.Conditions, v1alpha1.ConditionAccepted)
	apimeta.RemoveStatusCondition(&p.Status.Conditions, v1alpha1.ConditionStalled)
	apimeta.SetStatusCondition(&p.Status.Conditions, condition(v1alpha1.ConditionReady, "False", v1alpha1.ReasonNotAccepted))
	_, err = patch.Apply(ctx, c, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reasons(read(ctx, g, c))).To(Equal(map[string]string{
		v1alpha1.ConditionAccepted:  v1alpha1.ReasonInvalidSpec,
		v1alpha1.ConditionStalled:   v1alpha1.ReasonInvalidSpec,
		v1alpha1.ConditionReady:     v1alpha1.ReasonNotAccepted,
		v1alpha1.ConditionThrottled: v1alpha1.ReasonThrottledByHealth,
	}), "the policy controller's Accepted and Stalled survive")
}

// TestPatchFromAStaleReadIsRefused: a controller that read the policy
// before the other owner's last patch sends nothing, and the other's
// condition stays as that owner set it; its next pass, on what is stored,
// goes through.
func TestPatchFromAStaleReadIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := patchTestClient(g, stored())

	stale := read(ctx, g, c)
	statusPatch := NewPatch(EnforcerStatus, []*v1alpha1.RateLimitPolicy{stale})

	p := read(ctx, g, c)
	policyPatch := NewPatch(Policy, []*v1alpha1.RateLimitPolicy{p})
	apimeta.SetStatusCondition(&p.Status.Conditions, condition(v1alpha1.ConditionAccepted, "False", v1alpha1.ReasonStorageSecretMissing))
	_, err := policyPatch.Apply(ctx, c, nil)
	g.Expect(err).NotTo(HaveOccurred())

	apimeta.SetStatusCondition(&stale.Status.Conditions, condition(v1alpha1.ConditionReady, "False", v1alpha1.ReasonEnforcersStale))
	conflict, err := statusPatch.Apply(ctx, c, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conflict).To(BeTrue(), "the namespace needs another pass")
	g.Expect(reasons(read(ctx, g, c))).To(HaveKeyWithValue(v1alpha1.ConditionAccepted, v1alpha1.ReasonStorageSecretMissing))
	g.Expect(reasons(read(ctx, g, c))).To(HaveKeyWithValue(v1alpha1.ConditionReady, v1alpha1.ReasonEnforcersReady))

	fresh := read(ctx, g, c)
	statusPatch = NewPatch(EnforcerStatus, []*v1alpha1.RateLimitPolicy{fresh})
	apimeta.SetStatusCondition(&fresh.Status.Conditions, condition(v1alpha1.ConditionReady, "False", v1alpha1.ReasonNotAccepted))
	conflict, err = statusPatch.Apply(ctx, c, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conflict).To(BeFalse())
	g.Expect(reasons(read(ctx, g, c))).To(Equal(map[string]string{
		v1alpha1.ConditionAccepted:  v1alpha1.ReasonStorageSecretMissing,
		v1alpha1.ConditionReady:     v1alpha1.ReasonNotAccepted,
		v1alpha1.ConditionThrottled: v1alpha1.ReasonThrottledByHealth,
	}))
}

// TestOwnersShareNoCondition: every condition type has one writer.
func TestOwnersShareNoCondition(t *testing.T) {
	g := NewWithT(t)
	seen := map[string]string{}
	for _, o := range []Owner{Policy, EnforcerStatus} {
		for _, c := range o.Conditions {
			g.Expect(seen).NotTo(HaveKey(c), "%s is written by the %s and the %s", c, seen[c], o.Name)
			seen[c] = o.Name
		}
	}
	g.Expect(seen).To(HaveKey(v1alpha1.ConditionReady))
}
