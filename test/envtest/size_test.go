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

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sluicev1alpha1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/bulkpolicy"
)

// The documented limits of one policy (docs/operations.md, "Limits"): the
// API server stores a policy with as many overrides as the schema allows,
// within the cost budget of its validation rules.
var _ = Describe("RateLimitPolicy size", func() {
	It("stores a policy with 10,000 overrides, validation rules and all", func() {
		p := bulkpolicy.Overrides(namespace, "many-overrides", 10000)
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, p)).To(Succeed()) })

		stored := &sluicev1alpha1.RateLimitPolicy{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), stored)).To(Succeed())
		Expect(stored.Spec.Overrides).To(HaveLen(10000))
		last := stored.Spec.Overrides[9999]
		Expect(last.Tenant).To(Equal(bulkpolicy.Tenant(9999)))
		data, err := json.Marshal(stored)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("a policy of 10,000 overrides is %d bytes as stored\n", len(data))
	})
})
