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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

const (
	serviceSpec = `
rateLimitService: {domain: edge}
rules:
  - name: checkout
    match: {descriptors: [{key: generic_key, value: checkout}]}
    limits: [{requests: 10, period: 1m}]
`
	sidecarSpec = `
selector: {matchLabels: {app: shop}}
upstreamPort: 8080
rules:
  - name: all
    limits: [{requests: 10, period: 1s}]
`
)

// statusReconciler is fakeReconciler with the policies' status subresource,
// which the deferred status patch writes.
func statusReconciler(objs ...client.Object) *Reconciler {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.RateLimitPolicy{}).Build()
	return &Reconciler{Client: c, APIReader: c}
}

// shopPolicy is a policy of namespace shop with spec, created at second created.
func shopPolicy(t *testing.T, name, spec string, created int64) *v1alpha1.RateLimitPolicy {
	t.Helper()
	p := &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("uid-" + name),
		Generation: 1, CreationTimestamp: metav1.Unix(created, 0)}}
	if err := yaml.UnmarshalStrict([]byte(spec), &p.Spec); err != nil {
		t.Fatal(err)
	}
	return p
}

func reconcileShop(g Gomega, r *Reconciler) {
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: wellknown.ConfigMapName}})
	g.Expect(err).NotTo(HaveOccurred())
}

// readConfigMap parses the namespace's ConfigMap name as the enforcer and
// the service load it; nil when there is none.
func readConfigMap(g Gomega, r *Reconciler, name string) *config.Config {
	cm := &corev1.ConfigMap{}
	err := r.Get(context.Background(), types.NamespacedName{Namespace: "shop", Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.Labels).To(HaveKeyWithValue(wellknown.ManagedByLabel, wellknown.ManagedByValue))
	g.Expect(cm.OwnerReferences).To(BeEmpty())
	cfg, err := config.Parse([]byte(cm.Data[wellknown.ConfigKey]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.Annotations).To(HaveKeyWithValue(wellknown.ConfigHashAnnotation, cfg.Hash()))
	return cfg
}

func accepted(g Gomega, r *Reconciler, name string) *metav1.Condition {
	p := &v1alpha1.RateLimitPolicy{}
	g.Expect(r.Get(context.Background(), types.NamespacedName{Namespace: "shop", Name: name}, p)).To(Succeed())
	return apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionAccepted)
}

func policyNames(cfg *config.Config) map[string]string {
	out := map[string]string{} // name -> domain
	for _, p := range cfg.Policies {
		out[p.Name] = p.Domain
	}
	return out
}

func TestServicePoliciesArePublishedInTheServiceConfigMap(t *testing.T) {
	g := NewWithT(t)
	first, sidecar := shopPolicy(t, "first", serviceSpec, 1), shopPolicy(t, "web", sidecarSpec, 1)
	r := statusReconciler(first, sidecar)
	reconcileShop(g, r)

	service := readConfigMap(g, r, wellknown.ServiceConfigMapName)
	g.Expect(service).NotTo(BeNil())
	g.Expect(service.Namespace).To(Equal("shop"))
	g.Expect(policyNames(service)).To(Equal(map[string]string{"first": "edge"}))
	g.Expect(policyNames(readConfigMap(g, r, wellknown.ConfigMapName))).To(Equal(map[string]string{"web": ""}),
		"the enforcers' ConfigMap holds the sidecar policies only")
	g.Expect(accepted(g, r, "first")).To(And(HaveField("Status", metav1.ConditionTrue),
		HaveField("Message", ContainSubstring(wellknown.ServiceConfigMapName))))
	g.Expect(accepted(g, r, "web")).To(And(HaveField("Status", metav1.ConditionTrue),
		HaveField("Message", ContainSubstring(wellknown.ConfigMapName))))

	// A newer policy of the same domain is refused, naming the holder.
	g.Expect(r.Create(context.Background(), shopPolicy(t, "second", serviceSpec, 2))).To(Succeed())
	reconcileShop(g, r)
	g.Expect(accepted(g, r, "second")).To(And(HaveField("Status", metav1.ConditionFalse),
		HaveField("Reason", v1alpha1.ReasonConflictingDomains), HaveField("Message", ContainSubstring("policy first"))))
	g.Expect(accepted(g, r, "first")).To(HaveField("Status", metav1.ConditionTrue))
	g.Expect(policyNames(readConfigMap(g, r, wellknown.ServiceConfigMapName))).To(Equal(map[string]string{"first": "edge"}))

	// Without service policies, and with no pod mounting it, the ConfigMap goes.
	for _, name := range []string{"first", "second"} {
		g.Expect(r.Delete(context.Background(), &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}})).To(Succeed())
	}
	reconcileShop(g, r)
	g.Expect(readConfigMap(g, r, wellknown.ServiceConfigMapName)).To(BeNil())
	g.Expect(readConfigMap(g, r, wellknown.ConfigMapName)).NotTo(BeNil(), "the sidecar policy is still published")
}

func TestServiceConfigMapIsEmptiedWhilePodsMountIt(t *testing.T) {
	g := NewWithT(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ratelimit-0"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "ratelimit", Image: "sluice-ratelimit"}},
			Volumes: []corev1.Volume{{Name: "policies", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: wellknown.ServiceConfigMapName}}}}},
		},
	}
	r := statusReconciler(shopPolicy(t, "first", serviceSpec, 1), pod)
	reconcileShop(g, r)
	g.Expect(policyNames(readConfigMap(g, r, wellknown.ServiceConfigMapName))).To(HaveKey("first"))

	// The last policy goes: the service, which keeps the last file it
	// loaded, must read one without policies.
	g.Expect(r.Delete(context.Background(), &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "first"}})).To(Succeed())
	reconcileShop(g, r)
	emptied := readConfigMap(g, r, wellknown.ServiceConfigMapName)
	g.Expect(emptied).NotTo(BeNil())
	g.Expect(emptied.Policies).To(BeEmpty())

	g.Expect(r.Delete(context.Background(), pod)).To(Succeed())
	reconcileShop(g, r)
	g.Expect(readConfigMap(g, r, wellknown.ServiceConfigMapName)).To(BeNil())
}

// The rate limit service's running pods share a LocalFallback limit, as
// enforcers do: the compiled policy carries their number.
func TestServicePoliciesCountTheServicePods(t *testing.T) {
	g := NewWithT(t)
	servicePod := func(name string, labelled bool, phase corev1.PodPhase) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"app": "ratelimit"}},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "ratelimit", Image: "sluice-ratelimit"}}},
			Status: corev1.PodStatus{Phase: phase}}
		if labelled {
			pod.Labels[wellknown.RateLimitServiceLabel] = wellknown.RateLimitServiceLabelValue
		}
		return pod
	}
	spec := serviceSpec + "failureMode: LocalFallback\n"
	r := statusReconciler(shopPolicy(t, "first", spec, 1),
		servicePod("ratelimit-0", true, corev1.PodRunning), servicePod("ratelimit-1", true, corev1.PodPending),
		servicePod("ratelimit-old", true, corev1.PodSucceeded), servicePod("other", false, corev1.PodRunning))
	reconcileShop(g, r)
	cfg := readConfigMap(g, r, wellknown.ServiceConfigMapName)
	g.Expect(cfg).NotTo(BeNil())
	g.Expect(cfg.Policies).To(HaveLen(1))
	g.Expect(cfg.Policies[0].Replicas).To(BeEquivalentTo(2), "two service pods run or are about to")
}
