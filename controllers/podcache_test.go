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
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/watch"
	"github.com/sluice-dev/sluice/internal/inject"
)

// TestCachedPodsKeepWhatTheControllersRead: the manager's cache holds
// every pod of the cluster; it keeps an injected pod at under half of
// its size, and every decision the controllers take on the pod is the one
// they take on the whole of it.
func TestCachedPodsKeepWhatTheControllersRead(t *testing.T) {
	g := NewWithT(t)
	var transform func(any) (any, error)
	for obj, by := range CacheByObject() {
		if _, ok := obj.(*corev1.Pod); ok {
			transform = by.Transform
		}
	}
	g.Expect(transform).NotTo(BeNil(), "the manager's cache trims pods")

	sidecar := inject.EnforcerSidecar{
		Image: "sluice-enforcer:test", HTTPPort: 15080, AdminPort: 15081, RunAsUser: 65532, MaxProcs: inject.DefaultEnforcerMaxProcs,
		Resources:       corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
		DefaultRedisURL: "redis://redis.sluice-system:6379",
	}
	policy := v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "shop", UID: "u1"},
		Spec: v1alpha1.RateLimitPolicySpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}, UpstreamPort: 8080}}
	policies := []v1alpha1.RateLimitPolicy{policy}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "api-0", Namespace: "shop", UID: "p1", Labels: map[string]string{"app": "api"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "api-7d9", UID: "rs", Controller: new(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "shop/api:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			Env:   []corev1.EnvVar{{Name: "DATABASE_URL", Value: "postgres://db:5432/shop"}, {Name: "LOG_LEVEL", Value: "info"}}}}},
	}
	d := inject.DecideInNamespace(pod, policies, &sidecar, true)
	g.Expect(d.Inject).To(BeTrue())
	inject.Apply(pod, d, &sidecar)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.3", PodIPs: []corev1.PodIP{{IP: "10.0.0.3"}},
		Conditions:            []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "sluice-enforcer", Ready: true, Image: "sluice-enforcer:test"}},
		ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "shop/api:1"}}}

	out, err := transform(pod.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	trimmed := out.(*corev1.Pod)
	g.Expect(trimmed.Size()).To(BeNumerically("<", pod.Size()/2), "an injected pod is mostly its sidecar's environment, arguments and probes")

	g.Expect(inject.DecideInNamespace(trimmed, policies, &sidecar, true)).To(Equal(inject.DecideInNamespace(pod, policies, &sidecar, true)))
	g.Expect(inject.HasEnforcer(trimmed)).To(BeTrue())
	g.Expect(inject.MountsWriteToken(trimmed)).To(Equal(inject.MountsWriteToken(pod)))
	g.Expect(inject.EnforcerContainer(trimmed).Ports).To(Equal(inject.EnforcerContainer(pod).Ports), "the status controller polls the admin port")
	g.Expect(inject.SelectingPolicies(trimmed, policies)).To(Equal(inject.SelectingPolicies(pod, policies)))
	g.Expect(watch.ActivePod(trimmed)).To(BeTrue())
	g.Expect(trimmed.Status.PodIP).To(Equal("10.0.0.3"))
	g.Expect(metav1.GetControllerOf(trimmed)).To(Equal(metav1.GetControllerOf(pod)), "messages name the pod's workload")
	g.Expect(trimmed.Spec.Volumes).To(HaveLen(len(pod.Spec.Volumes)), "a volume of the enforcer's name is a conflict")
	g.Expect(trimmed.ManagedFields).To(BeNil())
}
