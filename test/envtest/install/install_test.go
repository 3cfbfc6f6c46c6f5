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
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

const crdName = "ratelimitpolicies.sluice.dev"

// policyNamespace holds the sample policies.
const policyNamespace = "shop"

// The chart and config/default against one API server, in order: each step
// starts from what the previous one left, as an operator's cluster does.
var _ = Describe("Installing Sluice", Ordered, func() {
	It("with the chart's default values: every object is accepted and the manager accepts its args", func(ctx SpecContext) {
		mustHelm("install", release, chartDir, "-n", releaseNamespace, "--create-namespace", "--wait=false")
		objs := releaseObjects()
		Expect(kinds(objs)).To(ContainElements("CustomResourceDefinition", "ServiceAccount", "ClusterRole",
			"ClusterRoleBinding", "Role", "RoleBinding", "Secret", "Service", "Deployment", "PodDisruptionBudget",
			"MutatingWebhookConfiguration"))
		expectInCluster(ctx, objs)
		expectManagerAcceptsArgs(objs)

		d := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: "sluice-manager"}, d)).To(Succeed())
		Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--leader-elect=true"))
		Expect(d.Spec.Template.Spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
		Expect(d.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
	})

	It("installs the CRD of config/crd/bases, marked to be kept", func(ctx SpecContext) {
		data, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "sluice.dev_ratelimitpolicies.yaml"))
		Expect(err).NotTo(HaveOccurred())
		generated := &apiextensionsv1.CustomResourceDefinition{}
		Expect(yaml.Unmarshal(data, generated)).To(Succeed())

		installed := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: crdName}, installed)).To(Succeed())
		Expect(installed.Annotations).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"))
		Expect(installed.Spec.Names).To(Equal(generated.Spec.Names))
		Expect(installed.Spec.Versions).To(HaveLen(len(generated.Spec.Versions)))
		for i, v := range generated.Spec.Versions {
			Expect(installed.Spec.Versions[i].Schema).To(Equal(v.Schema), "schema of %s", v.Name)
			Expect(installed.Spec.Versions[i].AdditionalPrinterColumns).To(Equal(v.AdditionalPrinterColumns))
		}
	})

	It("runs the manager with the chart's args and permissions: certificate, caBundle, readiness, policies Accepted", func(ctx SpecContext) {
		manager := startManager(releaseObjects())
		defer manager.stop()

		By("issuing the webhook certificate into the chart's Secret and its CA into the chart's webhook configuration")
		secret := &corev1.Secret{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: "sluice-webhook-server-cert"}, secret)).To(Succeed())
			g.Expect(secret.Data).To(HaveKey("tls.crt"))
			g.Expect(secret.Data).To(HaveKey("tls.key"))
			g.Expect(secret.Data).To(HaveKey("ca.crt"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			webhook := &admissionregistrationv1.MutatingWebhookConfiguration{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "sluice-injector"}, webhook)).To(Succeed())
			g.Expect(webhook.Webhooks).To(HaveLen(1))
			g.Expect(webhook.Webhooks[0].ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]))
		}).Should(Succeed())

		By("serving the webhook, and so answering its readiness probe, once the kubelet would have mounted the certificate")
		manager.mountCertificate(secret)
		Eventually(manager.ready).WithTimeout(time.Minute).Should(Equal(http.StatusOK))

		By("accepting the samples, applied with server-side apply")
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policyNamespace}})).To(Succeed())
		args := append([]string{"apply", "--server-side", "-n", policyNamespace}, fileArgs(sampleFiles())...)
		first := mustKubectl(args...)
		names := sampleNames()
		for _, name := range names {
			Expect(first).To(ContainSubstring("ratelimitpolicy.sluice.dev/" + name + " serverside-applied"))
		}
		for _, name := range names {
			mustKubectl("wait", "rlp/"+name, "-n", policyNamespace, "--for=condition=Accepted", "--timeout=60s")
		}

		By("changing nothing when the same samples are applied again")
		// Once the controllers have written their status, nothing changes
		// the policies but an apply.
		var before map[string]string
		Eventually(func(g Gomega) {
			settled := resourceVersions(policyNamespace)
			time.Sleep(time.Second)
			before = resourceVersions(policyNamespace)
			g.Expect(before).To(Equal(settled))
		}).WithTimeout(time.Minute).Should(Succeed())
		Expect(before).To(HaveLen(len(names)))
		mustKubectl(args...)
		Expect(resourceVersions(policyNamespace)).To(Equal(before), "applying the same samples again changed them")
		diff, exit := diffOutput(append([]string{"--server-side", "-n", policyNamespace}, fileArgs(sampleFiles())...)...)
		Expect(exit).To(Equal(0), "kubectl diff after apply is not empty:\n%s", diff)
	})

	It("upgrades with changed values", func(ctx SpecContext) {
		mustHelm("upgrade", release, chartDir, "-n", releaseNamespace, "--wait=false",
			"-f", filepath.Join(chartDir, "ci", "monitoring-values.yaml"),
			"--set", "manager.replicas=3", "--set", "webhook.failurePolicy=Fail", "--set", "enforcer.failureMode=Closed")
		objs := releaseObjects()
		Expect(kinds(objs)).To(ContainElements("ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"))
		expectInCluster(ctx, objs)
		expectManagerAcceptsArgs(objs)

		d := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: "sluice-manager"}, d)).To(Succeed())
		Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--default-failure-mode=Closed"))
		webhook := &admissionregistrationv1.MutatingWebhookConfiguration{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "sluice-injector"}, webhook)).To(Succeed())
		Expect(webhook.Webhooks).To(HaveLen(1))
		Expect(webhook.Webhooks[0].FailurePolicy).To(HaveValue(Equal(admissionregistrationv1.Fail)))
	})

	It("uninstalls, keeping the CRD and every policy with crds.keep", func(ctx SpecContext) {
		mustHelm("uninstall", release, "-n", releaseNamespace, "--wait")
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: "sluice-manager"}, &appsv1.Deployment{})).
			To(Satisfy(apierrors.IsNotFound), "the manager outlived its release")
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())
		var policies v1alpha1.RateLimitPolicyList
		Expect(k8sClient.List(ctx, &policies, client.InNamespace(policyNamespace))).To(Succeed())
		Expect(policies.Items).To(HaveLen(len(sampleNames())))
	})

	for _, file := range ciValuesFiles() {
		name := filepath.Base(file)
		It("with ci/"+name+": every object is accepted and the manager accepts its args", func(ctx SpecContext) {
			// The kept CRD carries this release's name, so each install
			// adopts it again.
			mustHelm("install", release, chartDir, "-n", releaseNamespace, "--wait=false", "-f", filepath.Join(chartDir, "ci", name))
			objs := releaseObjects()
			expectInCluster(ctx, objs)
			expectManagerAcceptsArgs(objs)
			mustHelm("uninstall", release, "-n", releaseNamespace, "--wait")
		})
	}

	It("uninstalls the CRD, and the policies with it, after an upgrade to crds.keep=false", func(ctx SpecContext) {
		mustHelm("install", release, chartDir, "-n", releaseNamespace, "--wait=false")
		mustHelm("upgrade", release, chartDir, "-n", releaseNamespace, "--wait=false", "--set", "crds.keep=false")
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed())
		Expect(crd.Annotations).NotTo(HaveKey("helm.sh/resource-policy"))
		mustHelm("uninstall", release, "-n", releaseNamespace, "--wait")
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{})
		}).Should(Satisfy(apierrors.IsNotFound))
	})

	It("with kubectl apply -k config/default: the chart's default install, accepted as it is", func(ctx SpecContext) {
		rendered := decodeObjects(mustKubectl("kustomize", filepath.Join(root, "config", "default")))
		chart := decodeObjects(mustHelm("template", release, chartDir, "-n", releaseNamespace))
		var withoutNamespace []*unstructured.Unstructured
		for _, obj := range rendered {
			if obj.GetKind() != "Namespace" {
				withoutNamespace = append(withoutNamespace, obj)
			}
		}
		Expect(objectKeys(withoutNamespace)).To(Equal(objectKeys(chart)), "config/default and the chart's defaults install different objects")

		out := mustKubectl("apply", "--server-side", "-k", filepath.Join(root, "config", "default"))
		Expect(strings.Count(out, "serverside-applied")).To(Equal(len(rendered)), out)
		expectInCluster(ctx, rendered)
		diff, exit := diffOutput("--server-side", "-k", filepath.Join(root, "config", "default"))
		Expect(exit).To(Equal(0), "kubectl diff after apply -k is not empty:\n%s", diff)
	})
})
