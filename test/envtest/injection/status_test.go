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

package injection

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

var _ = Describe("Policy status from running enforcers", Ordered, func() {
	var (
		ns       string
		policy   *v1alpha1.RateLimitPolicy
		pods     []*corev1.Pod
		procs    []*enforcerProcess
		upstream *httptest.Server
	)

	BeforeAll(func(ctx SpecContext) {
		if enforcerBin == "" {
			Skip("cmd/enforcer does not exist in this tree: the status loop needs real sluice-enforcer processes")
		}
		upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("hello\n"))
		}))
		DeferCleanup(upstream.Close)
		_, port, err := net.SplitHostPort(upstream.Listener.Addr().String())
		Expect(err).NotTo(HaveOccurred())
		upstreamPort, err := strconv.Atoi(port)
		Expect(err).NotTo(HaveOccurred())

		ns = newNamespace(ctx, true)
		policy = newPolicy(ns, "api", "api", int32(upstreamPort))
		createPolicy(ctx, policy)
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveReady(metav1.ConditionTrue, v1alpha1.ReasonNoPodsSelected, 1))

		By("creating two pods through the webhook, and their enforcers on 127.0.0.2 and 127.0.0.3")
		for i := range enforcerIPs {
			pod := newPod(ns, fmt.Sprintf("api-%d", i), map[string]string{"app": "api"})
			Expect(k8sClient.Create(ctx, pod)).To(Succeed())
			Expect(enforcerOf(pod)).NotTo(BeNil())
			pods = append(pods, pod)
		}
		// The kubelet would keep the volume current; these enforcers get the
		// file once, so mirror the configuration that counts both pods.
		Eventually(func(g Gomega) int32 {
			cm := &corev1.ConfigMap{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: wellknown.ConfigMapName}, cm)).To(Succeed())
			published, err := config.Parse([]byte(cm.Data[wellknown.ConfigKey]))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(published.Policies).To(HaveLen(1))
			return published.Policies[0].Replicas
		}).Should(BeEquivalentTo(len(enforcerIPs)))
		for i, ip := range enforcerIPs {
			procs = append(procs, startEnforcer(ctx, pods[i], ip))
			pods[i].Status.PodIP = ip
			pods[i].Status.Phase = corev1.PodRunning
			Expect(k8sClient.Status().Update(ctx, pods[i])).To(Succeed())
		}
	})

	It("goes Ready once both enforcers run the current generation", func(ctx SpecContext) {
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveReady(metav1.ConditionTrue, v1alpha1.ReasonEnforcersReady, 1))
		Expect(condition(ctx, policy, v1alpha1.ConditionReady).Message).To(Equal("2 of 2 enforcers run generation 1 and reach Redis"))
		Expect(enforcers(ctx, policy)).To(Equal(v1alpha1.EnforcerCounts{Selected: 2, Injected: 2, Ready: 2, UpToDate: 2, Summary: "2/2"}))

		out := kubectl("wait", "--for=condition=Ready", "-n", ns, "rlp/api", "--timeout=30s")
		Expect(out).To(ContainSubstring("condition met"))
		Expect(kubectl("get", "rlp", "-n", ns)).To(MatchRegexp(`api\s+Enforce\s+TokenBucket\s+2/2\s+True`))
	})

	It("polls /status with the namespace's token, which another pod does not have", func(ctx SpecContext) {
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: wellknown.AdminSecretName}, secret)).To(Succeed())
		Expect(secret.OwnerReferences).To(BeEmpty(), "the manager's, kept while injected pods run, not the policies'")
		Expect(kubectl("get", "pod", "-n", ns, "api-0", "-o", "yaml")).NotTo(ContainSubstring(string(secret.Data[wellknown.AdminTokenKey])),
			"no token in a pod spec")

		status := "http://" + net.JoinHostPort(enforcerIPs[0], strconv.Itoa(int(sidecar.AdminPort))) + "/status"
		for _, auth := range []string{"", "Bearer not-the-token"} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, status, nil)
			Expect(err).NotTo(HaveOccurred())
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
			Expect(string(body)).NotTo(ContainSubstring(`"policies"`))
		}
		resp, err := http.Get("http://" + net.JoinHostPort(enforcerIPs[0], strconv.Itoa(int(sidecar.AdminPort))) + "/readyz")
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK), "probes need no token")
	})

	It("says so when an enforcer refuses the credential, and recovers with the right one", func(ctx SpecContext) {
		procs[1].writeToken("a-token-the-manager-does-not-have")
		Eventually(func() string { return condition(ctx, policy, v1alpha1.ConditionReady).Message }).Should(ContainSubstring(
			"pod api-1: enforcer refused the status credential: 401 Unauthorized: wrong bearer token"))
		procs[1].mirrorToken(ctx)
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveReady(metav1.ConditionTrue, v1alpha1.ReasonEnforcersReady, 1))
	})

	It("sums the decisions of the enforcers", func(ctx SpecContext) {
		// Two requests to each enforcer, under one limit shared in Redis:
		// the first enforcer allows 2, the second 1 and denies 1.
		var codes []int
		for i := range 4 {
			proxy := "http://" + net.JoinHostPort(enforcerIPs[i/2], strconv.Itoa(int(sidecar.HTTPPort)))
			resp, err := http.Get(proxy + "/v1/orders")
			Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			codes = append(codes, resp.StatusCode)
		}
		Expect(codes).To(Equal([]int{200, 200, 200, 429}), "3 requests a minute")
		Eventually(func() v1alpha1.DecisionCounts {
			current := &v1alpha1.RateLimitPolicy{}
			Expect(k8sClient.Get(ctx, key(policy), current)).To(Succeed())
			return current.Status.Decisions
		}).Should(Equal(v1alpha1.DecisionCounts{Allowed: 3, Denied: 1}))
	})

	It("keeps the status current when a rollout brings the decisions back to zero", func(ctx SpecContext) {
		By("replacing both enforcers, whose counters start again from zero")
		for _, e := range procs {
			e.restart()
		}
		Eventually(func() v1alpha1.DecisionCounts {
			current := &v1alpha1.RateLimitPolicy{}
			Expect(k8sClient.Get(ctx, key(policy), current)).To(Succeed())
			return current.Status.Decisions
		}).Should(Equal(v1alpha1.DecisionCounts{}))
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveReady(metav1.ConditionTrue, v1alpha1.ReasonEnforcersReady, 1))
	})

	It("drops Ready while the enforcers run an older generation, and regains it when they reload", func(ctx SpecContext) {
		Expect(k8sClient.Get(ctx, key(policy), policy)).To(Succeed())
		policy.Spec.Rules[0].Limits[0].Requests = 5
		Expect(k8sClient.Update(ctx, policy)).To(Succeed())
		Expect(policy.Generation).To(BeEquivalentTo(2))

		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveReady(metav1.ConditionFalse, v1alpha1.ReasonEnforcersStale, 2))
		Expect(condition(ctx, policy, v1alpha1.ConditionReady).Message).To(HavePrefix("2 of 2 enforcers run generation 1 of the policy, not 2"))
		Expect(enforcers(ctx, policy)).To(HaveField("UpToDate", BeEquivalentTo(0)))

		By("the kubelet updating the ConfigMap volumes")
		for _, e := range procs {
			e.mirrorConfig(ctx)
		}
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveReady(metav1.ConditionTrue, v1alpha1.ReasonEnforcersReady, 2))
		Expect(eventsAbout(ctx, policy)).To(ContainElements(
			HaveField("Reason", v1alpha1.ReasonEnforcersStale), HaveField("Reason", v1alpha1.ReasonEnforcersReady)),
			"Ready transitions are Events")
	})

	It("stays Ready while another policy of the namespace changes", func(ctx SpecContext) {
		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: wellknown.ConfigMapName}, cm)).To(Succeed())
		before := cm.Annotations[wellknown.ConfigHashAnnotation]

		By("creating another policy, which the enforcers do not load: the kubelet has not refreshed their volume")
		other := newPolicy(ns, "other", "other", policy.Spec.UpstreamPort)
		createPolicy(ctx, other)
		Eventually(func(g Gomega) string {
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: wellknown.ConfigMapName}, cm)).To(Succeed())
			return cm.Annotations[wellknown.ConfigHashAnnotation]
		}).ShouldNot(Equal(before))
		Consistently(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }, "3s").
			Should(haveReady(metav1.ConditionTrue, v1alpha1.ReasonEnforcersReady, 2), "the enforcers run this policy's current entry")
		Expect(k8sClient.Delete(ctx, other)).To(Succeed())
	})

	It("says when the enforcers cannot reach Redis, and what they do meanwhile", func(ctx SpecContext) {
		redis.Stop()
		DeferCleanup(func() { Expect(redis.Restart()).To(Succeed()) })

		// Each enforcer notices on its next ping, within a second of the other.
		Eventually(func(g Gomega) {
			ready := condition(ctx, policy, v1alpha1.ConditionReady)
			g.Expect(ready).To(haveReady(metav1.ConditionFalse, v1alpha1.ReasonDegraded, 2))
			g.Expect(ready.Message).To(HavePrefix("enforcer on pods api-0, api-1 cannot reach Redis: "))
			g.Expect(ready.Message).To(HaveSuffix("; failing open"))
		}).WithContext(ctx).Should(Succeed())
		Expect(enforcers(ctx, policy)).To(Equal(v1alpha1.EnforcerCounts{Selected: 2, Injected: 2, Ready: 2, UpToDate: 2, Degraded: 2, Summary: "2/2"}),
			"failing open, the enforcers stay ready")

		Expect(redis.Restart()).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveReady(metav1.ConditionTrue, v1alpha1.ReasonEnforcersReady, 2))
	})

	It("reports a pod that opts out without holding Ready on it", func(ctx SpecContext) {
		pod := newPod(ns, "api-debug", map[string]string{"app": "api", wellknown.InjectAnnotation: "false"})
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		Eventually(func() string { return condition(ctx, policy, v1alpha1.ConditionReady).Message }).Should(Equal(
			"2 of 2 enforcers run generation 2 and reach Redis; pod api-debug opts out with sluice.dev/inject=false and is not limited"))
		Expect(condition(ctx, policy, v1alpha1.ConditionReady)).To(haveReady(metav1.ConditionTrue, v1alpha1.ReasonEnforcersReady, 2))
		Expect(enforcers(ctx, policy)).To(HaveField("Summary", "2/2"))
		Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
	})

	It("counts a stopped enforcer out", func(ctx SpecContext) {
		procs[1].stop()
		Eventually(func() v1alpha1.EnforcerCounts { return enforcers(ctx, policy) }).Should(
			Equal(v1alpha1.EnforcerCounts{Selected: 2, Injected: 2, Ready: 1, UpToDate: 1, Summary: "1/2"}))
		ready := condition(ctx, policy, v1alpha1.ConditionReady)
		Expect(ready).To(haveReady(metav1.ConditionFalse, v1alpha1.ReasonEnforcersNotReady, 2))
		Expect(ready.Message).To(HavePrefix(fmt.Sprintf("enforcer on pod api-1 does not answer on %s: ",
			net.JoinHostPort(enforcerIPs[1], strconv.Itoa(int(sidecar.AdminPort))))))
		Expect(kubectl("get", "rlp", "-n", ns)).To(MatchRegexp(`api\s+Enforce\s+TokenBucket\s+1/2\s+False`))
	})

	It("shows a selected pod the webhook never injected, and what to restart", func(ctx SpecContext) {
		// The opt-out label keeps the webhook from being called, as an
		// outage with failurePolicy Ignore would; then the label goes.
		pod := newPod(ns, "api-2", map[string]string{"app": "api", wellknown.InjectAnnotation: "false"})
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "api",
			UID: "0c8f3a4e-5a5e-4a43-9a3e-8a1c2f7e9b10", Controller: new(true)}}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		Expect(enforcerOf(pod)).To(BeNil())
		delete(pod.Labels, wellknown.InjectAnnotation)
		Expect(k8sClient.Update(ctx, pod)).To(Succeed())

		Eventually(func() v1alpha1.EnforcerCounts { return enforcers(ctx, policy) }).Should(
			And(HaveField("Selected", BeEquivalentTo(3)), HaveField("Injected", BeEquivalentTo(2))))
		Eventually(func() string { return condition(ctx, policy, v1alpha1.ConditionReady).Message }).Should(HavePrefix(
			"1 of 3 selected pods has no enforcer: pod api-2 predates the policy or was created while the injection webhook was unavailable: restart statefulset/api"))
	})
})
