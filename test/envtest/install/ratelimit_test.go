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

package install

import (
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// ratelimitObject converts the rate limit service's object of kind among
// objs into out, failing when there is none.
func ratelimitObject(objs []*unstructured.Unstructured, kind string, out any) {
	for _, obj := range objs {
		if obj.GetKind() == kind && obj.GetLabels()["app.kubernetes.io/component"] == "ratelimit" {
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, out)).To(Succeed())
			return
		}
	}
	Fail("no rate limit service " + kind + " among " + strings.Join(objectKeys(objs), ", "))
}

var _ = Describe("The chart's rate limit service", func() {
	ratelimitValues := filepath.Join("ci", "ratelimit-values.yaml")

	It("is off by default", func() {
		for _, obj := range decodeObjects(mustHelm("template", release, chartDir, "-n", releaseNamespace)) {
			Expect(obj.GetLabels()["app.kubernetes.io/component"]).NotTo(Equal("ratelimit"), "%s rendered with default values", objectKey(obj))
		}
	})

	It("renders a hardened Deployment, its Service, PodDisruptionBudget, NetworkPolicy and ServiceMonitor", func() {
		objs := decodeObjects(mustHelm("template", release, chartDir, "-n", releaseNamespace, "-f", filepath.Join(chartDir, ratelimitValues)))

		d := &appsv1.Deployment{}
		ratelimitObject(objs, "Deployment", d)
		Expect(d.Name).To(Equal("sluice-ratelimit"))
		Expect(*d.Spec.Replicas).To(BeEquivalentTo(3))
		pod := d.Spec.Template
		podLabels := labels.Set(pod.Labels)
		Expect(metav1.LabelSelectorAsSelector(d.Spec.Selector)).To(Satisfy(func(s labels.Selector) bool { return s.Matches(podLabels) }))
		Expect(podLabels).To(HaveKeyWithValue(wellknown.RateLimitServiceLabel, wellknown.RateLimitServiceLabelValue),
			"the manager finds the service's pods by this label, to read its policies' status")
		Expect(pod.Spec.Containers).To(HaveLen(1))
		c := pod.Spec.Containers[0]
		Expect(c.Image).To(Equal("sluice-ratelimit:v0.1.0"))
		Expect(*pod.Spec.SecurityContext.RunAsNonRoot).To(BeTrue())
		Expect(*pod.Spec.SecurityContext.RunAsUser).To(BeEquivalentTo(65532))
		Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
		Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
		Expect(c.Args).To(ContainElements("--listen=:8081", "--admin-listen=:6070", "--config-dir=/etc/sluice-ratelimit/config",
			"--tls-cert-file=/etc/sluice-ratelimit/tls/tls.crt", "--tls-key-file=/etc/sluice-ratelimit/tls/tls.key",
			"--tls-client-ca-file=/etc/sluice-ratelimit/client-ca/ca.crt",
			"--policy-config=/etc/sluice-ratelimit/policies/config.json", "--status-token-file=/etc/sluice-ratelimit/admin/token"))
		Expect(c.Env).To(ContainElements(
			corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			corev1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}))
		Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "REDIS_URL", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "ratelimit-redis"}, Key: "url"}}}))
		volumes := map[string]corev1.VolumeSource{}
		for _, v := range pod.Spec.Volumes {
			volumes[v.Name] = v.VolumeSource
		}
		Expect(volumes["config"].ConfigMap.Name).To(Equal("ratelimit-config"))
		Expect(volumes["policies"].ConfigMap.Name).To(Equal(wellknown.ServiceConfigMapName))
		Expect(*volumes["policies"].ConfigMap.Optional).To(BeTrue(), "the pods must start before the manager writes the policies")
		Expect(volumes["admin-token"].Secret.SecretName).To(Equal(wellknown.AdminSecretName))
		Expect(*volumes["admin-token"].Secret.Optional).To(BeTrue())
		Expect(volumes["admin-token"].Secret.Items).To(ConsistOf(corev1.KeyToPath{Key: wellknown.AdminTokenKey, Path: "token"}))
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.Name] = m.MountPath
		}
		Expect(mounts).To(HaveKeyWithValue("policies", "/etc/sluice-ratelimit/policies"))
		Expect(mounts).To(HaveKeyWithValue("admin-token", "/etc/sluice-ratelimit/admin"))
		Expect(volumes["tls"].Secret.SecretName).To(Equal("ratelimit-tls"))
		Expect(volumes["client-ca"].Secret.SecretName).To(Equal("ratelimit-client-ca"))

		svc := &corev1.Service{}
		ratelimitObject(objs, "Service", svc)
		Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels)).To(BeTrue(), "the Service selects no pod of the Deployment")
		ports := map[string]corev1.ServicePort{}
		for _, p := range svc.Spec.Ports {
			ports[p.Name] = p
		}
		Expect(ports["grpc"].Port).To(BeEquivalentTo(8081))
		Expect(*ports["grpc"].AppProtocol).To(Equal("grpc"))
		Expect(ports["admin"].Port).To(BeEquivalentTo(6070))

		pdb := &policyv1.PodDisruptionBudget{}
		ratelimitObject(objs, "PodDisruptionBudget", pdb)
		Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(2))
		Expect(metav1.LabelSelectorAsSelector(pdb.Spec.Selector)).To(Satisfy(func(s labels.Selector) bool { return s.Matches(podLabels) }))

		np := &networkingv1.NetworkPolicy{}
		ratelimitObject(objs, "NetworkPolicy", np)
		Expect(metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)).To(Satisfy(func(s labels.Selector) bool { return s.Matches(podLabels) }))
		Expect(np.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress))
		Expect(np.Spec.Ingress).To(HaveLen(3))
		grpcPort, adminPort := intstr.FromString("grpc"), intstr.FromString("admin")
		Expect(np.Spec.Ingress[0].Ports).To(HaveLen(1))
		Expect(*np.Spec.Ingress[0].Ports[0].Port).To(Equal(grpcPort))
		Expect(np.Spec.Ingress[0].From).To(ConsistOf(networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "istio-system"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"istio": "ingressgateway"}},
		}), "the gRPC port admits other pods than the gateway's")
		// The manager, in the release namespace, polls /status on the admin port.
		var manager *appsv1.Deployment
		for _, obj := range objs {
			if obj.GetKind() == "Deployment" && obj.GetLabels()["app.kubernetes.io/component"] == "manager" {
				manager = &appsv1.Deployment{}
				Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, manager)).To(Succeed())
			}
		}
		Expect(manager).NotTo(BeNil())
		Expect(*np.Spec.Ingress[1].Ports[0].Port).To(Equal(adminPort))
		Expect(np.Spec.Ingress[1].From).To(HaveLen(1))
		Expect(np.Spec.Ingress[1].From[0].NamespaceSelector).To(BeNil(), "the manager runs in the service's namespace")
		Expect(metav1.LabelSelectorAsSelector(np.Spec.Ingress[1].From[0].PodSelector)).To(Satisfy(func(s labels.Selector) bool {
			return s.Matches(labels.Set(manager.Spec.Template.Labels))
		}), "the manager's pods may not reach the admin port")
		Expect(*np.Spec.Ingress[2].Ports[0].Port).To(Equal(adminPort))
		Expect(np.Spec.Ingress[2].From).To(ConsistOf(networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}},
		}))

		var monitor *unstructured.Unstructured
		for _, obj := range objs {
			if obj.GetKind() == "ServiceMonitor" && obj.GetName() == "sluice-ratelimit" {
				monitor = obj
			}
		}
		Expect(monitor).NotTo(BeNil(), "metrics.serviceMonitor renders no ServiceMonitor for the rate limit service")
		selector, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
		Expect(labels.SelectorFromSet(selector).Matches(labels.Set(svc.Labels))).To(BeTrue())
		endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
		Expect(endpoints).To(ConsistOf(HaveKeyWithValue("port", "admin")))
	})

	It("passes flags sluice-ratelimit accepts", func() {
		objs := decodeObjects(mustHelm("template", release, chartDir, "-n", releaseNamespace, "-f", filepath.Join(chartDir, ratelimitValues)))
		d := &appsv1.Deployment{}
		ratelimitObject(objs, "Deployment", d)
		bin := filepath.Join(GinkgoT().TempDir(), "sluice-ratelimit")
		build := exec.Command("go", "build", "-o", bin, "./cmd/ratelimit")
		build.Dir = root
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "build sluice-ratelimit: %s", out)
		args := d.Spec.Template.Spec.Containers[0].Args
		got, err := run(bin, append(append([]string{}, args...), "--version")...)
		Expect(err).NotTo(HaveOccurred(), "sluice-ratelimit refuses the chart's args %q:\n%s", args, got)
		Expect(got).To(ContainSubstring("sluice-ratelimit"))
	})

	It("installs with kubectl apply -k config/ratelimit: the chart's service and the example files, accepted as they are", func(ctx SpecContext) {
		rendered := decodeObjects(mustKubectl("kustomize", filepath.Join(root, "config", "ratelimit")))
		Expect(kinds(rendered)).To(ConsistOf("ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"))
		d := &appsv1.Deployment{}
		ratelimitObject(rendered, "Deployment", d)
		var configMap string
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil && (v.ConfigMap.Optional == nil || !*v.ConfigMap.Optional) { // the manager writes the optional one
				configMap = v.ConfigMap.Name
			}
		}
		Expect(objectKeys(rendered)).To(ContainElement("ConfigMap "+releaseNamespace+"/"+configMap), "the Deployment mounts a ConfigMap config/ratelimit does not have")

		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, ns))).To(Succeed())
		out := mustKubectl("apply", "--server-side", "--dry-run=server", "-k", filepath.Join(root, "config", "ratelimit"))
		Expect(strings.Count(out, "serverside-applied")).To(Equal(len(rendered)), out)
	})

	It("serves only the namespace's RateLimitPolicies when no ConfigMap of files is named", func() {
		objs := decodeObjects(mustHelm("template", release, chartDir, "-n", releaseNamespace,
			"-f", valuesFile("rateLimitService:\n  enabled: true\n  networkPolicy: {allowedClients: [{podSelector: {}}]}\nredis: {enabled: true}\n")))
		d := &appsv1.Deployment{}
		ratelimitObject(objs, "Deployment", d)
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.Args).To(ContainElement(HavePrefix("--policy-config=")))
		Expect(c.Args).NotTo(ContainElement(HavePrefix("--config-dir=")), "no folder of envoyproxy/ratelimit files to read")
		for _, v := range d.Spec.Template.Spec.Volumes {
			Expect(v.Name).NotTo(Equal("config"), "a volume of a ConfigMap no one named")
		}
	})

	It("passes each listed policy's storage Secret under the variable its compiled configuration names", func() {
		objs := decodeObjects(mustHelm("template", release, chartDir, "-n", releaseNamespace,
			"-f", valuesFile("rateLimitService:\n  enabled: true\n  networkPolicy: {allowedClients: [{podSelector: {}}]}\n"+
				"  policyStorage:\n  - {policy: checkout, secretName: redis-checkout}\n  - {policy: eu.orders-v2, secretName: redis-eu, key: primary}\n"+
				"redis: {enabled: true}\n")))
		d := &appsv1.Deployment{}
		ratelimitObject(objs, "Deployment", d)
		env := map[string]*corev1.SecretKeySelector{}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				env[e.Name] = e.ValueFrom.SecretKeyRef
			}
		}
		for policy, want := range map[string]corev1.SecretKeySelector{
			"checkout":     {LocalObjectReference: corev1.LocalObjectReference{Name: "redis-checkout"}, Key: "url", Optional: ptr.To(true)},
			"eu.orders-v2": {LocalObjectReference: corev1.LocalObjectReference{Name: "redis-eu"}, Key: "primary", Optional: ptr.To(true)},
		} {
			name := compile.RedisURLEnv(policy)
			Expect(env).To(HaveKey(name), "policy %s", policy)
			Expect(*env[name]).To(Equal(want), "policy %s", policy)
		}

		out, err := helm("template", "refused", chartDir, "-f", valuesFile("rateLimitService:\n  enabled: true\n  networkPolicy: {enabled: false}\n"+
			"  policyStorage: [{policy: checkout}]\nredis: {enabled: true}\n"))
		Expect(err).To(HaveOccurred(), "an entry without its Secret was accepted")
		Expect(out).To(ContainSubstring("policyStorage/0': missing property 'secretName'"))
	})

	DescribeTable("is refused, with the value to set named, when it cannot work",
		func(values, message string) {
			out, err := helm("template", "refused", chartDir, "-f", valuesFile(values))
			Expect(err).To(HaveOccurred(), "helm template accepted:\n%s", values)
			Expect(out).To(ContainSubstring(message))
		},
		Entry("no clients allowed", "rateLimitService:\n  enabled: true\n  config: {configMapName: rl}\nredis: {enabled: true}\n",
			"rateLimitService.networkPolicy.allowedClients must select the gateway pods"),
		Entry("no Redis", "rateLimitService:\n  enabled: true\n  config: {configMapName: rl}\n  networkPolicy: {enabled: false}\n",
			"rateLimitService needs a Redis"),
		Entry("TLS without a certificate", "rateLimitService:\n  enabled: true\n  config: {configMapName: rl}\n  networkPolicy: {enabled: false}\n  tls: {enabled: true}\nredis: {enabled: true}\n",
			"rateLimitService.tls.secretName must name"),
		Entry("a password in the URL", "rateLimitService:\n  enabled: true\n  config: {configMapName: rl}\n  networkPolicy: {enabled: false}\n  redis: {url: \"redis://:hunter2@r:6379\"}\n",
			"rateLimitService.redis.url carries a password"),
	)
})
