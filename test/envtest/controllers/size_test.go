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
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/reload"
	"github.com/sluice-dev/sluice/enforcer/rules"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/testing/bulkpolicy"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// mountConfigMap writes cm's keys to a folder as the kubelet writes a
// ConfigMap volume, and returns the path enforcers are given (--config).
func mountConfigMap(cm *corev1.ConfigMap) string {
	dir := GinkgoT().TempDir()
	for k, v := range cm.Data {
		Expect(os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600)).To(Succeed())
	}
	for k, v := range cm.BinaryData {
		Expect(os.WriteFile(filepath.Join(dir, k), v, 0o600)).To(Succeed())
	}
	return filepath.Join(dir, wellknown.ConfigKey)
}

// enforcerTable loads the mounted ConfigMap as an enforcer does and
// compiles its rule table.
func enforcerTable(cm *corev1.ConfigMap) *rules.Table {
	loaded, err := (&reload.Source{ConfigPath: mountConfigMap(cm)}).Read()
	Expect(err).NotTo(HaveOccurred())
	table, err := rules.New(loaded.ForPod())
	Expect(err).NotTo(HaveOccurred())
	return table
}

// createAll creates policies a few at a time, as kubectl apply -f of a folder would.
func createAll(ctx context.Context, policies []v1alpha1.RateLimitPolicy) {
	var wg sync.WaitGroup
	work := make(chan *v1alpha1.RateLimitPolicy)
	for range 8 {
		wg.Go(func() {
			defer GinkgoRecover()
			for p := range work {
				Expect(k8sClient.Create(ctx, p)).To(Succeed())
			}
		})
	}
	for i := range policies {
		work <- &policies[i]
	}
	close(work)
	wg.Wait()
}

// settle deletes the namespace's policies and waits until the manager has
// deleted its ConfigMap: the work a large namespace makes must not spill
// into the specs after it. The API server is slow with large objects on a
// busy machine, hence the long waits of these specs.
func settle(ctx context.Context, namespace string) {
	Expect(k8sClient.DeleteAllOf(ctx, &v1alpha1.RateLimitPolicy{}, client.InNamespace(namespace))).To(Succeed())
	Eventually(func() *corev1.ConfigMap {
		_, cm := publishedConfig(ctx, namespace)
		return cm
	}, largeTimeout).Should(BeNil())
}

const largeTimeout = 3 * time.Minute

var _ = Describe("Large configurations", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		DeferCleanup(func(ctx SpecContext) { settle(ctx, ns) })
	})

	It("publishes a namespace of 1,000 policies compressed, and enforcers read it", func(ctx SpecContext) {
		policies := bulkpolicy.Namespace(ns, 1000)
		createAll(ctx, policies)

		var cm *corev1.ConfigMap
		Eventually(func() int {
			var cfg *config.Config
			cfg, cm = publishedConfig(ctx, ns)
			if cfg == nil {
				return 0
			}
			return len(cfg.Policies)
		}, largeTimeout).Should(Equal(1000))
		Expect(cm.Data).NotTo(HaveKey(wellknown.ConfigKey))
		Expect(cm.BinaryData).To(HaveKey(wellknown.CompressedConfigKey))
		GinkgoWriter.Printf("1,000 policies: %d bytes compressed\n", len(cm.BinaryData[wellknown.CompressedConfigKey]))
		Eventually(func() *metav1.Condition { return condition(ctx, &policies[999], v1alpha1.ConditionAccepted) }, largeTimeout).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCompiled, 1))

		table := enforcerTable(cm)
		Expect(table.Policies()).To(HaveLen(1000), "an enforcer without its pod's labels applies every policy")
	})

	It("publishes a policy of 10,000 overrides compressed, and an enforcer applies the last of them", func(ctx SpecContext) {
		p := bulkpolicy.Overrides(ns, "many-overrides", 10000)
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, p, v1alpha1.ConditionAccepted) }, largeTimeout).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCompiled, 1))
		_, cm := publishedConfig(ctx, ns)
		Expect(cm.BinaryData).To(HaveKey(wellknown.CompressedConfigKey))
		GinkgoWriter.Printf("10,000 overrides: %d bytes compressed\n", len(cm.BinaryData[wellknown.CompressedConfigKey]))

		check, override, ok := enforcerTable(cm).TenantCheck(rules.TenantQuery{
			Policy: p.Name, Rule: bulkpolicy.Rule, Tenant: bulkpolicy.Tenant(9999), Method: "GET", Path: "/"})
		Expect(ok).To(BeTrue())
		Expect(override).To(BeTrue(), "the tenant's own limits")
		Expect(check.Request.Windows).To(HaveLen(1))
		Expect(check.Request.Windows[0].Requests).To(Equal(int64(bulkpolicy.LastOverrideLimit)))
	})

	It("keeps the published configuration when the next does not fit even compressed, and says so once", func(ctx SpecContext) {
		// Tenants of random base64, which gzip shrinks by a quarter at best:
		// 4,000 of them fit, 8,000 do not.
		first := randomOverrides(ns, "first", 4000)
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, first, v1alpha1.ConditionAccepted) }, largeTimeout).
			Should(haveCondition(metav1.ConditionTrue, v1alpha1.ReasonCompiled, 1))
		_, published := publishedConfig(ctx, ns)

		second := randomOverrides(ns, "second", 4000)
		Expect(k8sClient.Create(ctx, second)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, second, v1alpha1.ConditionAccepted) }, largeTimeout).
			Should(haveCondition(metav1.ConditionFalse, v1alpha1.ReasonConfigTooLarge, 1))
		message := condition(ctx, second, v1alpha1.ConditionAccepted).Message
		Expect(message).To(MatchRegexp(`is \d+ bytes compressed \(\d+ of JSON\), more than the %d a ConfigMap holds`, compile.MaxConfigBytes))

		Consistently(func() string {
			_, cm := publishedConfig(ctx, ns)
			return cm.Annotations[wellknown.ConfigHashAnnotation]
		}).Should(Equal(published.Annotations[wellknown.ConfigHashAnnotation]), "never a truncated configuration")
		countTooLarge := func() int {
			return strings.Count(strings.Join(eventReasons(ctx, second), " "), v1alpha1.ReasonConfigTooLarge)
		}
		Eventually(countTooLarge).Should(Equal(1))
		Consistently(countTooLarge).Should(Equal(1), "an Event on the transition, not on every pass")
	})
})

// randomOverrides is a policy of n overrides whose tenants are 200
// characters of base64, unlike each other.
func randomOverrides(namespace, name string, n int) *v1alpha1.RateLimitPolicy {
	p := bulkpolicy.Overrides(namespace, name, n)
	for i := range p.Spec.Overrides {
		var tenant strings.Builder
		for j := 0; tenant.Len() < 200; j++ {
			sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d", name, i, j))
			tenant.WriteString(base64.RawURLEncoding.EncodeToString(sum[:]))
		}
		p.Spec.Overrides[i].Tenant = tenant.String()[:200]
	}
	return p
}
