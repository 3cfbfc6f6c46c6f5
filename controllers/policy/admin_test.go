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
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

func fakeReconciler(objs ...client.Object) *Reconciler {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	return &Reconciler{Client: c, APIReader: c}
}

func readAdminSecret(g Gomega, r *Reconciler) *corev1.Secret {
	return readSecret(g, r, wellknown.AdminSecretName)
}

func readSecret(g Gomega, r *Reconciler, name string) *corev1.Secret {
	s := &corev1.Secret{}
	g.Expect(r.Get(context.Background(), types.NamespacedName{Namespace: "shop", Name: name}, s)).To(Succeed())
	return s
}

func TestTheReadAndWriteTokensAreTwoSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r := fakeReconciler()
	g.Expect(r.reconcileAdminSecrets(ctx, "shop")).To(Succeed())
	read, write := readSecret(g, r, wellknown.AdminSecretName), readSecret(g, r, wellknown.AdminWriteSecretName)
	g.Expect(len(write.Data[wellknown.AdminTokenKey])).To(BeNumerically(">=", 43), "32 random bytes")
	g.Expect(write.Data[wellknown.AdminTokenKey]).NotTo(Equal(read.Data[wellknown.AdminTokenKey]), "the read token does not write")
	g.Expect(write.Labels).To(HaveKeyWithValue(wellknown.ManagedByLabel, wellknown.ManagedByValue))
	g.Expect(write.OwnerReferences).To(BeEmpty(), "the enforcers outlive the policies: no garbage collection with the last one")

	g.Expect(r.reconcileAdminSecrets(ctx, "shop")).To(Succeed())
	g.Expect(readSecret(g, r, wellknown.AdminWriteSecretName).Data).To(Equal(write.Data), "kept across reconciles")

	g.Expect(r.deleteAdminSecrets(ctx, "shop")).To(Succeed())
	for _, name := range wellknown.AdminSecretNames {
		g.Expect(apierrors.IsNotFound(r.Get(ctx, types.NamespacedName{Namespace: "shop", Name: name}, &corev1.Secret{}))).To(BeTrue(), name)
	}
}

func TestAdminSecretKeepsItsToken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r := fakeReconciler()

	g.Expect(r.reconcileAdminSecret(ctx, "shop", wellknown.AdminSecretName)).To(Succeed())
	first := readAdminSecret(g, r)
	token := string(first.Data[wellknown.AdminTokenKey])
	g.Expect(len(token)).To(BeNumerically(">=", 43), "32 random bytes")
	g.Expect(first.Labels).To(HaveKeyWithValue(wellknown.ManagedByLabel, wellknown.ManagedByValue))

	g.Expect(r.reconcileAdminSecret(ctx, "shop", wellknown.AdminSecretName)).To(Succeed())
	second := readAdminSecret(g, r)
	g.Expect(string(second.Data[wellknown.AdminTokenKey])).To(Equal(token), "kept across reconciles")

	// A token someone shortened is replaced.
	second.Data[wellknown.AdminTokenKey] = []byte("guessable")
	g.Expect(r.Update(ctx, second)).To(Succeed())
	g.Expect(r.reconcileAdminSecret(ctx, "shop", wellknown.AdminSecretName)).To(Succeed())
	g.Expect(string(readAdminSecret(g, r).Data[wellknown.AdminTokenKey])).NotTo(BeElementOf("guessable", token))

	g.Expect(r.deleteAdminSecrets(ctx, "shop")).To(Succeed())
	g.Expect(r.Get(ctx, types.NamespacedName{Namespace: "shop", Name: wellknown.AdminSecretName}, &corev1.Secret{})).NotTo(Succeed())
}

func TestAdminSecretTakenOverGetsANewToken(t *testing.T) {
	g := NewWithT(t)
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: wellknown.AdminSecretName},
		Data: map[string][]byte{wellknown.AdminTokenKey: []byte("a-token-someone-chose-and-knows-well-enough")}}
	r := fakeReconciler(theirs)
	r.Secrets = managedOnly{r.Client}
	g.Expect(r.reconcileAdminSecret(context.Background(), "shop", wellknown.AdminSecretName)).To(Succeed())
	s := readAdminSecret(g, r)
	g.Expect(s.Labels).To(HaveKeyWithValue(wellknown.ManagedByLabel, wellknown.ManagedByValue))
	g.Expect(s.Data[wellknown.AdminTokenKey]).NotTo(BeEmpty())
	g.Expect(s.Data[wellknown.AdminTokenKey]).NotTo(Equal(theirs.Data[wellknown.AdminTokenKey]))
}

// managedOnly reads like NewManagedSecretCache: it does not see objects
// without the managed-by label.
type managedOnly struct{ client.Reader }

func (m managedOnly) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := m.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if obj.GetLabels()[wellknown.ManagedByLabel] != wellknown.ManagedByValue {
		return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
	}
	return nil
}

func TestNetworkPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	np := &EnforcerNetworkPolicy{AdminPort: 15081, ManagerNamespace: "sluice-system",
		ManagerPodLabels:  map[string]string{"app.kubernetes.io/name": "sluice"},
		MetricsNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"monitoring": "true"}}}
	spec := np.spec()
	g.Expect(spec.PodSelector.MatchLabels).To(Equal(map[string]string{wellknown.EnforcerLabel: wellknown.EnforcerLabelValue}))
	g.Expect(spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
	g.Expect(spec.Ingress).To(HaveLen(3))
	open := spec.Ingress[0]
	g.Expect(open.From).To(BeEmpty(), "every other port from anywhere")
	g.Expect(open.Ports).To(HaveLen(3))
	g.Expect(open.Ports[0].Port.IntValue()).To(Equal(1))
	g.Expect(*open.Ports[0].EndPort).To(Equal(int32(15080)))
	g.Expect(open.Ports[1].Port.IntValue()).To(Equal(15082))
	g.Expect(*open.Ports[1].EndPort).To(Equal(int32(65535)))
	g.Expect(*open.Ports[2].Protocol).To(Equal(corev1.ProtocolUDP))
	for _, rule := range spec.Ingress[1:] {
		g.Expect(rule.Ports).To(HaveLen(1))
		g.Expect(rule.Ports[0].Port.IntValue()).To(Equal(15081))
		g.Expect(rule.Ports[0].EndPort).To(BeNil())
		g.Expect(rule.From).To(HaveLen(1))
	}
	g.Expect(spec.Ingress[1].From[0].NamespaceSelector.MatchLabels).To(Equal(map[string]string{"kubernetes.io/metadata.name": "sluice-system"}))
	g.Expect(spec.Ingress[1].From[0].PodSelector.MatchLabels).To(Equal(np.ManagerPodLabels))

	r := fakeReconciler()
	r.NetworkPolicy = np
	policies := []*v1alpha1.RateLimitPolicy{newPolicy(1)}
	key := types.NamespacedName{Namespace: "shop", Name: NetworkPolicyName}
	g.Expect(r.reconcileNetworkPolicy(ctx, "shop", policies)).To(Succeed())
	g.Expect(r.Get(ctx, key, &networkingv1.NetworkPolicy{})).To(Succeed())

	// The namespace isolates pods itself: ours would open its other ports.
	g.Expect(r.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "default-deny"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}})).To(Succeed())
	g.Expect(r.reconcileNetworkPolicy(ctx, "shop", policies)).To(Succeed())
	g.Expect(r.Get(ctx, key, &networkingv1.NetworkPolicy{})).NotTo(Succeed(), "stepped back")
}
