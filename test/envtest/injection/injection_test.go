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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

var _ = Describe("The injection webhook", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx, true)
	})

	It("returns a selected pod with the enforcer sidecar, and reports it on the policy", func(ctx SpecContext) {
		policy := newPolicy(ns, "public-api", "api", 8080)
		createPolicy(ctx, policy)

		pod := newPod(ns, "", map[string]string{"app": "api"})
		pod.GenerateName = "api-"
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())

		c := enforcerOf(pod)
		Expect(c).NotTo(BeNil(), "the pod the API server returns has the enforcer")
		Expect(c.RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)), "a native sidecar")
		Expect(c.Image).To(Equal(sidecar.Image))
		Expect(c.Ports).To(ConsistOf(
			HaveField("Name", wellknown.HTTPPortName), HaveField("Name", wellknown.AdminPortName)))
		Expect(c.Args).To(ContainElement("--upstream=http://127.0.0.1:8080"))
		Expect(c.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
		Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		Expect(c.StartupProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		Expect(pod.Spec.Volumes).To(ContainElements(
			HaveField("ConfigMap.Name", wellknown.ConfigMapName), HaveField("DownwardAPI", Not(BeNil()))))
		Expect(pod.Annotations).To(HaveKeyWithValue(wellknown.InjectedAnnotation, sidecar.Image))
		Expect(pod.Spec.Containers).To(HaveLen(1), "the application's containers are left as they are")

		Eventually(func() []string { return eventNotes(ctx, policy, inject.ReasonInjected) }).Should(
			ConsistOf(ContainSubstring("pod api-*: injected the enforcer for policy public-api, forwarding to port 8080")))

		By("admitting a copy of the injected pod")
		again := newPod(ns, "api-copy", pod.Labels)
		again.Annotations = pod.Annotations
		again.Spec = *pod.Spec.DeepCopy()
		again.Spec.NodeName = ""
		Expect(k8sClient.Create(ctx, again)).To(Succeed())
		Expect(again.Spec.InitContainers).To(HaveLen(1), "re-admission does not inject twice")
		Expect(again.Spec.Volumes).To(HaveLen(len(pod.Spec.Volumes)))
		Eventually(func() []string { return eventNotes(ctx, policy, inject.ReasonAlreadyInjected) }).Should(
			ConsistOf("pod api-copy: the pod already has a container named sluice-enforcer"))
	})

	It("injects in a dry run without recording an Event", func(ctx SpecContext) {
		policy := newPolicy(ns, "public-api", "api", 8080)
		createPolicy(ctx, policy)
		pod := newPod(ns, "api-dry", map[string]string{"app": "api"})
		Expect(k8sClient.Create(ctx, pod, client.DryRunAll)).To(Succeed())
		Expect(enforcerOf(pod)).NotTo(BeNil())

		Expect(k8sClient.Create(ctx, newPod(ns, "api-0", map[string]string{"app": "api"}))).To(Succeed())
		Eventually(func() []string { return eventNotes(ctx, policy, inject.ReasonInjected) }).Should(
			ConsistOf(ContainSubstring("pod api-0:")), "only the real creation is reported")
		Consistently(func() []string { return eventNotes(ctx, policy, inject.ReasonInjected) }).Should(HaveLen(1))
	})

	It("records one Event per pod when pods are injected at once", func(ctx SpecContext) {
		policy := newPolicy(ns, "public-api", "api", 8080)
		createPolicy(ctx, policy)
		for _, name := range []string{"api-0", "api-1", "api-2"} {
			Expect(k8sClient.Create(ctx, newPod(ns, name, map[string]string{"app": "api"}))).To(Succeed())
		}
		Eventually(func() []string { return eventNotes(ctx, policy, inject.ReasonInjected) }).Should(ConsistOf(
			HavePrefix("pod api-0: injected"), HavePrefix("pod api-1: injected"), HavePrefix("pod api-2: injected")))
	})

	It("leaves pods it must not inject untouched, with an Event on the policy that selects them", func(ctx SpecContext) {
		policy := newPolicy(ns, "public-api", "api", 8080)
		createPolicy(ctx, policy)
		other := newPolicy(ns, "admin-api", "admin", 8080)
		createPolicy(ctx, other)

		untouched := func(pod *corev1.Pod) {
			GinkgoHelper()
			Expect(k8sClient.Create(ctx, pod)).To(Succeed())
			Expect(pod.Spec.InitContainers).To(BeEmpty(), "pod %s", pod.Name)
			Expect(pod.Annotations).NotTo(HaveKey(wellknown.InjectedAnnotation))
		}
		By("a pod no policy selects")
		untouched(newPod(ns, "worker-0", map[string]string{"app": "worker"}))

		By("a pod that opts out with the annotation")
		optedOut := newPod(ns, "api-debug", map[string]string{"app": "api"})
		optedOut.Annotations = map[string]string{wellknown.InjectAnnotation: "false"}
		untouched(optedOut)

		By("a pod that opts out with the label, which the webhook never sees")
		untouched(newPod(ns, "api-debug-2", map[string]string{"app": "api", wellknown.InjectAnnotation: "false"}))

		By("a pod on the host network")
		hostNet := newPod(ns, "api-host", map[string]string{"app": "api"})
		hostNet.Spec.HostNetwork = true
		untouched(hostNet)

		By("a selected pod in a namespace without the injection label")
		disabled := newNamespace(ctx, false)
		createPolicy(ctx, newPolicy(disabled, "public-api", "api", 8080))
		untouched(newPod(disabled, "api-0", map[string]string{"app": "api"}))

		Eventually(func() []string { return eventNotes(ctx, policy, inject.ReasonOptedOut) }).Should(ConsistOf(
			`pod api-debug: the pod opts out with sluice.dev/inject: "false", so policy public-api is not enforced on it`))
		Eventually(func() []string { return eventNotes(ctx, policy, inject.ReasonHostNetwork) }).Should(ConsistOf(
			ContainSubstring("pod api-host: the pod uses the host network")))
		Consistently(func() int { return len(injectionEvents(ctx, policy)) }).Should(Equal(2),
			"nothing about the unselected pod or the label opt-out")
		Expect(injectionEvents(ctx, other)).To(BeEmpty(), "a policy that selects none of them hears nothing")
		disabledPolicy := newPolicy(disabled, "public-api", "api", 8080)
		Expect(injectionEvents(ctx, disabledPolicy)).To(BeEmpty(), "the webhook is not called outside enabled namespaces")
	})

	It("refuses the newer of two policies with different upstream ports, and injects for the older", func(ctx SpecContext) {
		createPolicy(ctx, newPolicy(ns, "public-api", "api", 8080))
		second := newPolicy(ns, "api-v2", "api", 9090)
		createPolicy(ctx, second)
		accepted := condition(ctx, second, v1alpha1.ConditionAccepted)
		Expect(accepted.Status).To(Equal(metav1.ConditionFalse))
		Expect(accepted.Reason).To(Equal(v1alpha1.ReasonConflictingUpstreamPorts))
		Expect(accepted.Message).To(HavePrefix("policy public-api, created before, forwards to upstreamPort 8080 and this one to 9090"))

		pod := newPod(ns, "api-0", map[string]string{"app": "api"})
		Eventually(func() *corev1.Container {
			dry := pod.DeepCopy()
			Expect(k8sClient.Create(ctx, dry, client.DryRunAll)).To(Succeed())
			return enforcerOf(dry)
		}).ShouldNot(BeNil(), "once the webhook's cache has the refusal")
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		Expect(enforcerOf(pod).Args).To(ContainElement("--upstream=http://127.0.0.1:8080"))
	})

	It("refuses the newer of two policies with different upstream protocols, and injects for the older", func(ctx SpecContext) {
		grpc := newPolicy(ns, "orders-grpc", "orders", 9000)
		grpc.Spec.UpstreamProtocol = v1alpha1.UpstreamProtocolH2C
		createPolicy(ctx, grpc)
		second := newPolicy(ns, "orders-web", "orders", 9000)
		createPolicy(ctx, second)
		accepted := condition(ctx, second, v1alpha1.ConditionAccepted)
		Expect(accepted.Status).To(Equal(metav1.ConditionFalse))
		Expect(accepted.Reason).To(Equal(v1alpha1.ReasonConflictingUpstreamProtocols))
		Expect(accepted.Message).To(HavePrefix("policy orders-grpc, created before, forwards with upstreamProtocol H2C and this one with HTTP1"))

		pod := newPod(ns, "orders-0", map[string]string{"app": "orders"})
		Eventually(func() *corev1.Container {
			dry := pod.DeepCopy()
			Expect(k8sClient.Create(ctx, dry, client.DryRunAll)).To(Succeed())
			return enforcerOf(dry)
		}).ShouldNot(BeNil(), "once the webhook's cache has the refusal")
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		Expect(enforcerOf(pod).Args).To(ContainElements("--upstream=http://127.0.0.1:9000", "--upstream-protocol=H2C"))
	})

	It("runs with the failure policy and timeout of the manager's flags", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			var cfg admissionregistrationv1.MutatingWebhookConfiguration
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Name: wellknown.InjectionWebhookConfigurationName}, &cfg)).To(Succeed())
			g.Expect(cfg.Webhooks).To(HaveLen(1))
			g.Expect(cfg.Webhooks[0].FailurePolicy).To(HaveValue(Equal(webhookFailurePolicy)))
			g.Expect(cfg.Webhooks[0].TimeoutSeconds).To(HaveValue(BeEquivalentTo(webhookTimeoutSeconds)))
			g.Expect(cfg.Webhooks[0].ClientConfig.CABundle).NotTo(BeEmpty(), "the patch leaves the caBundle alone")
			g.Expect(cfg.Webhooks[0].NamespaceSelector.MatchLabels).To(HaveKeyWithValue(
				wellknown.InjectionNamespaceLabel, wellknown.InjectionEnabled), "and the selectors")
		}).WithContext(ctx).Should(Succeed())
	})
})
