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
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

var _ = Describe("The status of a rate limit service policy", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("counts the service's pods of the namespace, polled on their admin port with the namespace's token", func(ctx SpecContext) {
		// The service's /status: the policy not loaded yet, then loaded.
		var mu sync.Mutex
		var doc statusdoc.Document
		var auth string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			auth = r.Header.Get("Authorization")
			_ = json.NewEncoder(w).Encode(doc)
		}))
		DeferCleanup(srv.Close)
		_, portText, _ := net.SplitHostPort(srv.Listener.Addr().String())
		port, _ := strconv.Atoi(portText)

		policy := &v1alpha1.RateLimitPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns},
			Spec: v1alpha1.RateLimitPolicySpec{
				RateLimitService: &v1alpha1.RateLimitService{Domain: "edge"},
				Rules: []v1alpha1.Rule{{
					Name:   "checkout",
					Match:  &v1alpha1.RequestMatch{Descriptors: []v1alpha1.DescriptorEntryMatch{{Key: "generic_key", Value: "checkout"}}},
					Limits: []v1alpha1.Limit{{Requests: 10, Period: metav1.Duration{Duration: time.Minute}}},
				}},
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonEnforcersNotReady, 1))
		Expect(condition(ctx, policy, v1alpha1.ConditionReady).Message).To(And(
			ContainSubstring("no rate limit service pod runs in namespace "+ns),
			ContainSubstring("install the chart's rateLimitService")))
		Expect(kstatusOf(ctx, policy)).To(Equal(kstatus.InProgressStatus))

		By("starting a service pod that has not loaded the policy")
		mu.Lock()
		doc = statusdoc.Document{Ready: true, Redis: []statusdoc.Redis{{Name: "default", Reachable: true}}}
		mu.Unlock()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "sluice-ratelimit-0", Namespace: ns,
				Labels: map[string]string{wellknown.RateLimitServiceLabel: wellknown.RateLimitServiceLabelValue}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: wellknown.RateLimitServiceContainerName, Image: "sluice-ratelimit:1",
				Ports: []corev1.ContainerPort{{Name: wellknown.RateLimitServiceAdminPortName, ContainerPort: int32(port)}}}}},
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}}
		Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonEnforcersStale, 1))
		Expect(condition(ctx, policy, v1alpha1.ConditionReady).Message).To(
			Equal("the rate limit service on pod sluice-ratelimit-0 has not loaded the policy yet"))

		By("loading the policy")
		current := &v1alpha1.RateLimitPolicy{}
		Expect(k8sClient.Get(ctx, key(policy), current)).To(Succeed())
		mu.Lock()
		doc.Policies = []statusdoc.Policy{{Name: "edge", UID: string(current.UID), Generation: 1, FailureMode: "Open", Redis: "default"}}
		doc.Decisions = map[string]statusdoc.DecisionCounts{"edge": {Allowed: 7, Denied: 2}}
		mu.Unlock()
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonEnforcersReady, 1))
		Expect(k8sClient.Get(ctx, key(policy), current)).To(Succeed())
		Expect(current.Status.Enforcers).To(Equal(v1alpha1.EnforcerCounts{Selected: 1, Injected: 1, Ready: 1, UpToDate: 1, Summary: "1/1"}))
		Expect(current.Status.Decisions).To(Equal(v1alpha1.DecisionCounts{Allowed: 7, Denied: 2}))
		Expect(kstatusOf(ctx, policy)).To(Equal(kstatus.CurrentStatus))

		secret := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: wellknown.AdminSecretName}, secret)).To(Succeed())
		mu.Lock()
		defer mu.Unlock()
		Expect(auth).To(Equal("Bearer " + string(secret.Data[wellknown.AdminTokenKey])))
	})
})
