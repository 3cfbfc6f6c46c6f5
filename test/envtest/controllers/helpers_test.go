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
	"context"
	"os"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/envtestutil"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// newNamespace creates a namespace of its own for one spec.
func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shop-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// samplePolicy reads one of config/samples into namespace.
func samplePolicy(file, namespace string) *v1alpha1.RateLimitPolicy {
	data, err := os.ReadFile(filepath.Join(root, "config", "samples", file))
	Expect(err).NotTo(HaveOccurred())
	p := &v1alpha1.RateLimitPolicy{}
	Expect(yaml.UnmarshalStrict(data, p)).To(Succeed())
	p.Namespace = namespace
	return p
}

func key(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }

// publishedConfig is the namespace's compiled configuration as an enforcer
// reads it, with the ConfigMap that holds it; nil, nil while there is none.
func publishedConfig(ctx context.Context, namespace string) (*config.Config, *corev1.ConfigMap) {
	cm := &corev1.ConfigMap{}
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: wellknown.ConfigMapName}, cm)
	if err != nil {
		Expect(client.IgnoreNotFound(err)).To(Succeed())
		return nil, nil
	}
	cfg, err := parseConfigMap(cm)
	Expect(err).NotTo(HaveOccurred(), "the enforcer must be able to load what the controller writes")
	Expect(cm.Annotations).To(HaveKeyWithValue(wellknown.ConfigHashAnnotation, cfg.Hash()))
	return cfg, cm
}

// parseConfigMap reads the configuration cm holds, plain or compressed.
func parseConfigMap(cm *corev1.ConfigMap) (*config.Config, error) {
	doc, err := config.DocumentIn(cm.Data, cm.BinaryData, wellknown.ConfigKey)
	if err != nil {
		return nil, err
	}
	return config.Parse(doc)
}

// publishedServiceConfig is the configuration of the namespace's
// rateLimitService policies as the rate limit service reads it; nil while
// there is none.
func publishedServiceConfig(ctx context.Context, namespace string) *config.Config {
	cm := &corev1.ConfigMap{}
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: wellknown.ServiceConfigMapName}, cm)
	if err != nil {
		Expect(client.IgnoreNotFound(err)).To(Succeed())
		return nil
	}
	Expect(cm.Labels).To(HaveKeyWithValue(wellknown.ManagedByLabel, wellknown.ManagedByValue))
	cfg, err := parseConfigMap(cm)
	Expect(err).NotTo(HaveOccurred(), "the rate limit service must be able to load what the controller writes")
	Expect(cm.Annotations).To(HaveKeyWithValue(wellknown.ConfigHashAnnotation, cfg.Hash()))
	return cfg
}

// publishedPolicies maps the names of the published policies to their entries.
func publishedPolicies(ctx context.Context, namespace string) map[string]config.Policy {
	cfg, _ := publishedConfig(ctx, namespace)
	if cfg == nil {
		return nil
	}
	out := map[string]config.Policy{}
	for _, p := range cfg.Policies {
		out[p.Name] = p
	}
	return out
}

func condition(ctx context.Context, p *v1alpha1.RateLimitPolicy, conditionType string) *metav1.Condition {
	current := &v1alpha1.RateLimitPolicy{}
	Expect(k8sClient.Get(ctx, key(p), current)).To(Succeed())
	return apimeta.FindStatusCondition(current.Status.Conditions, conditionType)
}

// haveCondition matches a condition of the current generation.
func haveCondition(status metav1.ConditionStatus, reason string, generation int64) OmegaMatcher {
	return And(Not(BeNil()),
		HaveField("Status", status), HaveField("Reason", reason), HaveField("ObservedGeneration", generation))
}

// kstatusOf is what kubectl wait, Flux and Argo CD make of the policy.
func kstatusOf(ctx context.Context, p *v1alpha1.RateLimitPolicy) kstatus.Status {
	current := &v1alpha1.RateLimitPolicy{}
	Expect(k8sClient.Get(ctx, key(p), current)).To(Succeed())
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(current)
	Expect(err).NotTo(HaveOccurred())
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
	Expect(err).NotTo(HaveOccurred())
	return res.Status
}

// eventReasons lists the reasons of the policy controller's Events about
// the policy, oldest first (the status controller's, of Ready
// transitions, are the injection suite's).
func eventReasons(ctx context.Context, p *v1alpha1.RateLimitPolicy) []string {
	var events eventsv1.EventList
	Expect(k8sClient.List(ctx, &events, client.InNamespace(p.Namespace))).To(Succeed())
	var reasons []string
	for _, e := range events.Items {
		if e.Regarding.Kind == "RateLimitPolicy" && e.Regarding.Name == p.Name && e.ReportingController == "sluice-policy-controller" {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

func newPod(namespace, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
}

// kubectl runs the real kubectl as an admin and returns its output.
func kubectl(args ...string) string {
	bin, err := envtestutil.Kubectl(testEnv.BinaryAssetsDirectory)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "kubectl %v: %s", args, out)
	return string(out)
}
