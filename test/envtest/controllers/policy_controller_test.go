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
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

var _ = Describe("The policy controller", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("publishes a policy and follows its edits and its deletion", func(ctx SpecContext) {
		policy := samplePolicy("ratelimitpolicy_public_api.yaml", ns)
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())

		Eventually(func(g Gomega) {
			published := publishedPolicies(ctx, ns)
			g.Expect(published).To(HaveKey("public-api"))
			g.Expect(published["public-api"].Generation).To(BeEquivalentTo(1))
			g.Expect(published["public-api"].UID).To(BeEquivalentTo(policy.UID))
			g.Expect(published["public-api"].Rules[0].Limits).To(Equal([]config.Limit{{Requests: 60, Period: config.Duration{Duration: time.Minute}, Burst: 60}}))
		}).Should(Succeed())
		_, cm := publishedConfig(ctx, ns)
		Expect(cm.Labels).To(HaveKeyWithValue(wellknown.ManagedByLabel, wellknown.ManagedByValue))
		Expect(cm.OwnerReferences).To(BeEmpty(),
			"no garbage collection: deleting the ConfigMap with its last policy would leave running enforcers on their last configuration")
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionAccepted) }).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCompiled, 1))

		By("editing the limit")
		// Read again on a conflict: the status controller may patch Ready
		// between the read and the update.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8sClient.Get(ctx, key(policy), policy); err != nil {
				return err
			}
			policy.Spec.Rules[0].Limits[0].Requests = 120
			return k8sClient.Update(ctx, policy)
		})).To(Succeed())
		Eventually(func(g Gomega) {
			entry := publishedPolicies(ctx, ns)["public-api"]
			g.Expect(entry.Generation).To(BeEquivalentTo(2))
			g.Expect(entry.Rules[0].Limits[0].Requests).To(BeEquivalentTo(120))
		}).Should(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionAccepted) }).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCompiled, 2))

		By("deleting it")
		Expect(k8sClient.Delete(ctx, policy)).To(Succeed())
		Eventually(func() *config.Config { cfg, _ := publishedConfig(ctx, ns); return cfg }).Should(BeNil(),
			"the controller deletes the ConfigMap of a namespace without policies nor injected pods")
	})

	It("keeps an empty configuration for injected pods once the last policy is deleted, then deletes it with them", func(ctx SpecContext) {
		policy := samplePolicy("ratelimitpolicy_public_api.yaml", ns)
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		injected := newPod(ns, "api-1", policy.Spec.Selector.MatchLabels)
		injected.Spec.InitContainers = []corev1.Container{{Name: wellknown.EnforcerContainerName, Image: "sluice-enforcer:1"}}
		Expect(k8sClient.Create(ctx, injected)).To(Succeed())
		Eventually(func() map[string]config.Policy { return publishedPolicies(ctx, ns) }).Should(HaveKey("public-api"))
		tokens := func() map[string]string {
			out := map[string]string{}
			for _, name := range wellknown.AdminSecretNames {
				s := &corev1.Secret{}
				if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err == nil {
					Expect(s.OwnerReferences).To(BeEmpty(), "no garbage collection with the last policy")
					out[name] = string(s.Data[wellknown.AdminTokenKey])
				}
			}
			return out
		}
		Eventually(tokens).Should(HaveLen(len(wellknown.AdminSecretNames)))
		before := tokens()

		By("deleting the last policy")
		Expect(k8sClient.Delete(ctx, policy)).To(Succeed())
		Eventually(func(g Gomega) {
			cfg, cm := publishedConfig(ctx, ns)
			g.Expect(cfg).NotTo(BeNil(), "the ConfigMap stays while an enforcer reads it")
			g.Expect(cfg.Policies).To(BeEmpty(), "and tells it to pass traffic through")
			g.Expect(cm.Annotations).To(HaveKeyWithValue(wellknown.ConfigHashAnnotation, cfg.Hash()))
		}).Should(Succeed())
		Consistently(func() *config.Config { cfg, _ := publishedConfig(ctx, ns); return cfg }, "1s").ShouldNot(BeNil())
		Expect(tokens()).To(Equal(before), "the enforcers' credentials stay with them, so they can still be asked what they do")

		By("deleting the injected pod")
		Expect(k8sClient.Delete(ctx, injected, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() *config.Config { cfg, _ := publishedConfig(ctx, ns); return cfg }).Should(BeNil())
		Eventually(tokens).Should(BeEmpty(), "and go with the last of them")
	})

	It("publishes rateLimitService policies for the rate limit service, one policy per domain, and deletes their ConfigMap with them", func(ctx SpecContext) {
		servicePolicy := func(name string) *v1alpha1.RateLimitPolicy {
			p := &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			Expect(yaml.UnmarshalStrict([]byte(`
rateLimitService: {domain: edge}
rules:
  - name: checkout
    match: {descriptors: [{key: generic_key, value: checkout}]}
    limits: [{requests: 10, period: 1m}]
`), &p.Spec)).To(Succeed())
			return p
		}
		domains := func() map[string]string {
			cfg := publishedServiceConfig(ctx, ns)
			if cfg == nil {
				return nil
			}
			out := map[string]string{}
			for _, p := range cfg.Policies {
				out[p.Name] = p.Domain
			}
			return out
		}
		first := servicePolicy("first")
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		Eventually(domains).Should(Equal(map[string]string{"first": "edge"}))
		Eventually(func() *metav1.Condition { return condition(ctx, first, v1alpha1.ConditionAccepted) }).
			Should(And(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCompiled, 1),
				HaveField("Message", ContainSubstring(wellknown.ServiceConfigMapName))))
		Expect(publishedPolicies(ctx, ns)).To(BeEmpty(), "the enforcers' ConfigMap holds no rateLimitService policy")

		By("creating a second policy for the same domain")
		second := servicePolicy("second")
		Expect(k8sClient.Create(ctx, second)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, second, v1alpha1.ConditionAccepted) }).
			Should(And(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonConflictingDomains, 1),
				HaveField("Message", ContainSubstring("policy first"))))
		Expect(condition(ctx, first, v1alpha1.ConditionAccepted)).To(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCompiled, 1))
		Consistently(domains, "1s").Should(Equal(map[string]string{"first": "edge"}))

		By("deleting both")
		Expect(k8sClient.Delete(ctx, second)).To(Succeed())
		Expect(k8sClient.Delete(ctx, first)).To(Succeed())
		Eventually(func() *config.Config { return publishedServiceConfig(ctx, ns) }).Should(BeNil())
	})

	It("writes a ConfigMap deleted by hand again, with a Warning on its policies", func(ctx SpecContext) {
		policy := samplePolicy("ratelimitpolicy_public_api.yaml", ns)
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionAccepted) }).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCompiled, 1))
		_, cm := publishedConfig(ctx, ns)
		Expect(k8sClient.Delete(ctx, cm)).To(Succeed())
		Eventually(func(g Gomega) {
			_, again := publishedConfig(ctx, ns)
			g.Expect(again).NotTo(BeNil())
			g.Expect(again.UID).NotTo(Equal(cm.UID))
		}).Should(Succeed())
		Eventually(func() []string { return eventReasons(ctx, policy) }).Should(ContainElement(v1alpha1.ReasonConfigMapRecreated))
		recreated := func() int {
			n := 0
			for _, r := range eventReasons(ctx, policy) {
				if r == v1alpha1.ReasonConfigMapRecreated {
					n++
				}
			}
			return n
		}
		Consistently(recreated, "1s").Should(Equal(1), "announced once, not at every pass")
	})

	It("compiles every policy of a namespace into one ConfigMap, and none of another namespace", func(ctx SpecContext) {
		other := newNamespace(ctx)
		exports := samplePolicy("ratelimitpolicy_export_endpoint.yaml", ns)
		plans := samplePolicy("ratelimitpolicy_tiered_plans.yaml", ns)
		elsewhere := samplePolicy("ratelimitpolicy_login_protection.yaml", other)
		for _, p := range []*v1alpha1.RateLimitPolicy{exports, plans, elsewhere} {
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
		}

		Eventually(func() []string {
			cfg, _ := publishedConfig(ctx, ns)
			if cfg == nil {
				return nil
			}
			var names []string
			for _, p := range cfg.Policies {
				names = append(names, p.Name)
			}
			return names
		}).Should(Equal([]string{"exports", "plans"}), "sorted by name")
		Eventually(func() map[string]config.Policy { return publishedPolicies(ctx, other) }).Should(
			And(HaveLen(1), HaveKey("login")))

		By("deleting one of the two")
		Expect(k8sClient.Delete(ctx, plans)).To(Succeed())
		Eventually(func() map[string]config.Policy { return publishedPolicies(ctx, ns) }).Should(
			And(HaveLen(1), HaveKey("exports")))
	})

	It("counts the pods a policy selects, and Ready says why they run no enforcer", func(ctx SpecContext) {
		policy := samplePolicy("ratelimitpolicy_login_protection.yaml", ns)
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonNoPodsSelected, 1))

		selected := map[string]string{"app.kubernetes.io/name": "accounts"}
		Expect(k8sClient.Create(ctx, newPod(ns, "accounts-1", selected))).To(Succeed())
		Expect(k8sClient.Create(ctx, newPod(ns, "accounts-2", selected))).To(Succeed())
		Expect(k8sClient.Create(ctx, newPod(ns, "web-1", map[string]string{"app.kubernetes.io/name": "web"}))).To(Succeed())
		Eventually(func() int32 { return publishedPolicies(ctx, ns)["login"].Replicas }).Should(BeEquivalentTo(2),
			"LocalFallback gives each enforcer half of every limit")
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonEnforcersNotReady, 1))
		Expect(condition(ctx, policy, v1alpha1.ConditionReady).Message).To(ContainSubstring("is not labelled sluice.dev/injection=enabled"))
		Expect(kstatusOf(ctx, policy)).To(Equal(kstatus.InProgressStatus), "not Current while no enforcer runs")

		By("relabelling and deleting pods")
		pod := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "accounts-1"}, pod)).To(Succeed())
		pod.Labels = map[string]string{"app.kubernetes.io/name": "other"}
		Expect(k8sClient.Update(ctx, pod)).To(Succeed())
		Eventually(func() int32 { return publishedPolicies(ctx, ns)["login"].Replicas }).Should(BeEquivalentTo(1))
		Expect(k8sClient.Delete(ctx, newPod(ns, "accounts-2", nil))).To(Succeed())
		Eventually(func() int32 { return publishedPolicies(ctx, ns)["login"].Replicas }).Should(BeEquivalentTo(0))
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonNoPodsSelected, 1))
	})

	It("accepts a policy once its missing storage Secret is created, without a nudge", func(ctx SpecContext) {
		policy := samplePolicy("ratelimitpolicy_login_protection.yaml", ns)
		policy.Spec.Storage = &v1alpha1.Storage{SecretRef: &v1alpha1.SecretKeyReference{Name: "redis"}}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())

		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionAccepted) }).
			Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonStorageSecretMissing, 1))
		accepted := condition(ctx, policy, v1alpha1.ConditionAccepted)
		Expect(accepted.Message).To(ContainSubstring("Secret redis named in spec.storage.secretRef does not exist in namespace " + ns))
		Expect(accepted.Message).To(ContainSubstring("under key url"))
		Expect(condition(ctx, policy, v1alpha1.ConditionStalled)).To(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonStorageSecretMissing, 1))
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonNotAccepted, 1), "the status controller's Ready follows Accepted")
		Expect(kstatusOf(ctx, policy)).To(Equal(kstatus.FailedStatus), "GitOps tools stop waiting: the user must act")
		Expect(publishedPolicies(ctx, ns)).NotTo(HaveKey("login"), "nothing to enforce without its Redis")
		Eventually(func() []string { return eventReasons(ctx, policy) }).Should(Equal([]string{v1alpha1.ReasonStorageSecretMissing}))

		By("creating the Secret with another key first")
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "redis", Namespace: ns},
			StringData: map[string]string{"password": "hunter2"},
		}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		Eventually(func() string { return condition(ctx, policy, v1alpha1.ConditionAccepted).Message }).
			Should(ContainSubstring("Secret redis has no key url"))

		By("adding the key")
		secret.StringData = map[string]string{"url": "redis://redis:6379"}
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionAccepted) }).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCompiled, 1), "the policy itself was never touched")
		Expect(condition(ctx, policy, v1alpha1.ConditionStalled)).To(BeNil())
		Expect(publishedPolicies(ctx, ns)["login"].RedisURLEnv).To(Equal(compile.RedisURLEnv("login")))
		Eventually(func() []string { return eventReasons(ctx, policy) }).Should(
			Equal([]string{v1alpha1.ReasonStorageSecretMissing, v1alpha1.ReasonCompiled}))

		By("deleting the Secret again")
		Expect(k8sClient.Delete(ctx, secret)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionAccepted) }).
			Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonStorageSecretMissing, 1))
		Expect(condition(ctx, policy, v1alpha1.ConditionAccepted).Message).To(
			ContainSubstring("Enforcers keep applying generation 1, the last one accepted"))
		Expect(publishedPolicies(ctx, ns)).To(HaveKey("login"), "running enforcers keep their limits")
	})

	It("records Events on transitions only, never on every pass", func(ctx SpecContext) {
		policy := samplePolicy("ratelimitpolicy_health_exempt.yaml", ns)
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func() []string { return eventReasons(ctx, policy) }).Should(Equal([]string{v1alpha1.ReasonCompiled}))

		By("reconciling the namespace again and again")
		for i := range 5 {
			Expect(k8sClient.Create(ctx, newPod(ns, "web-"+string(rune('a'+i)), map[string]string{"app.kubernetes.io/name": "web"}))).To(Succeed())
		}
		Eventually(func() int32 { return publishedPolicies(ctx, ns)["web"].Replicas }).Should(BeEquivalentTo(5))
		Consistently(func() []string { return eventReasons(ctx, policy) }).Should(Equal([]string{v1alpha1.ReasonCompiled}))
	})

	It("restores its ConfigMap when someone edits or deletes it", func(ctx SpecContext) {
		policy := samplePolicy("ratelimitpolicy_public_api.yaml", ns)
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func() map[string]config.Policy { return publishedPolicies(ctx, ns) }).Should(HaveKey("public-api"))

		_, cm := publishedConfig(ctx, ns)
		want := cm.Data[wellknown.ConfigKey]
		cm.Data[wellknown.ConfigKey] = `{"schema":"sluice.dev/enforcer-config/v1","namespace":"` + ns + `","policies":[]}`
		Expect(k8sClient.Update(ctx, cm)).To(Succeed())
		Eventually(func(g Gomega) string {
			current := &corev1.ConfigMap{}
			g.Expect(k8sClient.Get(ctx, key(cm), current)).To(Succeed())
			return current.Data[wellknown.ConfigKey]
		}).Should(Equal(want))

		Expect(k8sClient.Delete(ctx, cm)).To(Succeed())
		Eventually(func(g Gomega) {
			restored := &corev1.ConfigMap{}
			g.Expect(k8sClient.Get(ctx, key(cm), restored)).To(Succeed())
			g.Expect(restored.UID).NotTo(Equal(cm.UID))
			g.Expect(restored.Data[wellknown.ConfigKey]).To(Equal(want))
		}).Should(Succeed())
	})

	It("shows no drift when the same manifest is applied again, and kstatus sees it Current", func(ctx SpecContext) {
		manifest := filepath.Join(root, "config", "samples", "ratelimitpolicy_tiered_plans.yaml")
		kubectl("apply", "--server-side", "--field-manager=gitops", "-n", ns, "-f", manifest)
		policy := &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Name: "plans", Namespace: ns}}

		// kstatus calls an object without conditions Current too: wait for the
		// controller's verdict first, then ask kstatus.
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionAccepted) }).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCompiled, 1))
		Eventually(func() *metav1.Condition { return condition(ctx, policy, v1alpha1.ConditionReady) }).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonNoPodsSelected, 1))
		Eventually(func() kstatus.Status { return kstatusOf(ctx, policy) }).Should(Equal(kstatus.CurrentStatus))
		Expect(k8sClient.Get(ctx, key(policy), policy)).To(Succeed())
		Expect(policy.Status.Algorithms).To(Equal("SlidingWindowCounter"))
		Expect(policy.Status.FailureMode).To(Equal(v1alpha1.FailureModeOpen), "the manager's default, which the spec does not set")
		Expect(kubectl("get", "ratelimitpolicy", "plans", "-n", ns, "-o", "wide")).To(MatchRegexp(`NoPodsSelected\s+Open\s+HTTP1`),
			"kubectl get -o wide shows the failure mode in effect")
		// Settled: no pass of the controller is pending.
		Consistently(func() string {
			Expect(k8sClient.Get(ctx, key(policy), policy)).To(Succeed())
			return policy.ResourceVersion
		}).Should(Equal(policy.ResourceVersion))
		before := policy.DeepCopy()
		_, cm := publishedConfig(ctx, ns)

		out := kubectl("apply", "--server-side", "--field-manager=gitops", "-n", ns, "-f", manifest)
		Expect(out).To(ContainSubstring("serverside-applied"))
		Consistently(func(g Gomega) {
			current := &v1alpha1.RateLimitPolicy{}
			g.Expect(k8sClient.Get(ctx, key(policy), current)).To(Succeed())
			g.Expect(current.ResourceVersion).To(Equal(before.ResourceVersion), "the second apply wrote nothing")
			g.Expect(current.Generation).To(Equal(before.Generation))
			_, currentCM := publishedConfig(ctx, ns)
			g.Expect(currentCM.ResourceVersion).To(Equal(cm.ResourceVersion))
		}).Should(Succeed())
		Expect(kubectl("diff", "--server-side", "--field-manager=gitops", "-n", ns, "-f", manifest)).To(BeEmpty())
	})
})
