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

package envtest

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sluicev1alpha1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/bulkpolicy"
)

// The documented limits of one policy (docs/operations.md, "Limits of
// size"): the API server stores a policy with as many overrides as the
// schema allows, within the cost budget of its validation rules, whether
// created or applied server-side.
var _ = Describe("RateLimitPolicy size", func() {
	It("stores a policy with 10,000 overrides, validation rules and all", func() {
		p := bulkpolicy.Overrides(namespace, "many-overrides", 10000)
		start := time.Now()
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		GinkgoWriter.Printf("created a policy of 10,000 overrides in %s\n", time.Since(start))
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, p)).To(Succeed()) })

		stored := &sluicev1alpha1.RateLimitPolicy{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), stored)).To(Succeed())
		Expect(stored.Spec.Overrides).To(HaveLen(10000))
		Expect(stored.Spec.Overrides[9999].Tenant).To(Equal(bulkpolicy.Tenant(9999)))
		data, err := json.Marshal(stored)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("a policy of 10,000 overrides is %d bytes as stored\n", len(data))
	})

	It("applies a policy with 10,000 overrides server-side, as kubectl apply --server-side and GitOps tools do", func() {
		p := bulkpolicy.Overrides(namespace, "applied-overrides", 10000)
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
		Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{Object: obj}
		start := time.Now()
		Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("gitops"), client.ForceOwnership)).To(Succeed())
		GinkgoWriter.Printf("applied a policy of 10,000 overrides in %s\n", time.Since(start))
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, u)).To(Succeed()) })

		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(u.GroupVersionKind())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(u), stored)).To(Succeed())
		data, err := json.Marshal(stored.Object)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("applied server-side, it is %d bytes as stored (managedFields included)\n", len(data))
	})

	It("refuses more than 10,000 overrides, and more than 4 limits in one", func() {
		p := bulkpolicy.Overrides(namespace, "too-many-overrides", 10001)
		err := k8sClient.Create(ctx, p, client.DryRunAll)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.overrides: Too many: 10001: must have at most 10000 items"))

		Expect(createSpec(`{rules: [` + apiRule + `], overrides: [{tenant: acme, rule: api, limits: [
			{requests: 1, period: 1s}, {requests: 2, period: 1m}, {requests: 3, period: 1h}, {requests: 4, period: 24h}, {requests: 5, period: 168h}]}]}`)).
			To(MatchError(ContainSubstring("spec.overrides[0].limits: Too many: 5: must have at most 4 items")))
	})
})
