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
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// TestEditFollowedUntilEnforcersRunIt: once a new configuration is
// published, the enforcers still on the earlier one are asked again within
// a second, not at the next pass of the poller (10 s by default), until
// they run it; an enforcer that keeps an old configuration for minutes is
// left to the pass.
func TestEditFollowedUntilEnforcersRunIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{wellknown.InjectionNamespaceLabel: wellknown.InjectionEnabled}}}
	policy := acceptedPolicy()
	policy.Namespace = "shop"
	policy.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}
	pod := deploymentPod("api-0", true)
	pod.UID = "shop/api-0"
	pod.Spec.InitContainers[0].Ports = []corev1.ContainerPort{{Name: wellknown.AdminPortName, ContainerPort: 15081}}
	pod.Status = corev1.PodStatus{PodIP: "10.0.0.3", Phase: corev1.PodRunning}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: wellknown.ConfigMapName,
		Annotations: map[string]string{wellknown.ConfigHashAnnotation: "edited"}}}
	c := fake.NewClientBuilder().WithScheme(pollerTestClient().Scheme()).
		WithObjects(ns, policy, pod, cm).WithStatusSubresource(&v1alpha1.RateLimitPolicy{}).Build()
	r := &Reconciler{Client: c, Interval: time.Hour}
	r.poller = newEnforcerPoller(c, c, func() *http.Client { return http.DefaultClient }, time.Hour, 1)
	running := func(hash string) {
		st := healthy(policy.Generation, 0, 0)
		st.Config.Hash = hash
		r.poller.mu.Lock()
		r.poller.results[pod.UID] = polledEnforcer{Address: "10.0.0.3:15081", Status: st}
		r.poller.wanted = map[types.UID]*corev1.Pod{}
		r.poller.mu.Unlock()
	}
	reconcile := func() ctrl.Result {
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cm)})
		g.Expect(err).NotTo(HaveOccurred())
		return res
	}

	running("before-the-edit")
	g.Expect(reconcile().RequeueAfter).To(Equal(catchUpPoll), "looked at again in a second")
	g.Expect(r.poller.wanted).To(HaveKey(pod.UID), "the enforcer still on the earlier configuration is asked again at once")

	running("edited")
	g.Expect(reconcile().RequeueAfter).To(BeZero(), "every enforcer runs it: the poller's pass is enough")
	g.Expect(r.poller.wanted).To(BeEmpty())

	// Published long ago, and this enforcer still refuses it.
	r.history.mu.Lock()
	seen := r.history.namespaces["shop"]
	seen[len(seen)-1].seenAt = time.Now().Add(-catchUpFor - time.Second)
	r.history.mu.Unlock()
	running("before-the-edit")
	g.Expect(reconcile().RequeueAfter).To(BeZero())
	g.Expect(r.poller.wanted).To(BeEmpty(), "left to the poller's pass")
}
