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
	"errors"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sluicev1alpha1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/policyfile"
)

// dryRunCreate sends doc to the API server as kubectl apply would (strict
// field validation), as a dry run, and returns the object it would store.
func dryRunCreate(doc string) (*unstructured.Unstructured, error) {
	return dryRunCreateAs(doc, "")
}

// dryRunCreateAs is dryRunCreate under another name, when not empty.
func dryRunCreateAs(doc, name string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal([]byte(doc), &obj.Object)).To(Succeed())
	obj.SetNamespace(filesNamespace)
	if name != "" {
		obj.SetName(name)
	}
	return obj, k8sClient.Create(ctx, obj, client.DryRunAll, client.FieldValidation("Strict"))
}

// filesNamespace is the namespace of this file's dry runs: other specs of
// the suite create the samples for real in theirs, and a dry run of an
// object that exists is refused as a conflict, whatever the order specs
// run in.
var filesNamespace string

// inNamespace puts doc in filesNamespace.
func inNamespace(doc string) string {
	return strings.ReplaceAll(doc, "namespace: shop", "namespace: "+filesNamespace)
}

var _ = Describe("sluice-enforcer --policy-file", func() {
	BeforeEach(func() {
		if filesNamespace == "" {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "policy-files-"}}
			Expect(k8sClient.Create(ctx, ns)).To(Succeed())
			filesNamespace = ns.Name
		}
	})

	It("refuses each policy the API server refuses, with the same messages", func() {
		data, err := os.ReadFile(filepath.Join("..", "..", "internal", "policyfile", "testdata", "refused.yaml"))
		Expect(err).NotTo(HaveOccurred())
		docs := strings.Split(string(data), "\n---\n")
		Expect(docs).NotTo(BeEmpty())
		for _, doc := range docs {
			doc = inNamespace(doc)
			_, serverErr := dryRunCreate(doc)
			_, fileErr := policyfile.Parse([]byte(doc))
			var invalid *policyfile.InvalidError
			Expect(errors.As(fileErr, &invalid)).To(BeTrue(), "want an InvalidError, got %v", fileErr)
			GinkgoWriter.Printf("API server: %v\n", serverErr)
			Expect(apierrors.IsInvalid(serverErr)).To(BeTrue(), "%s: want an Invalid error, got %v", invalid.Name, serverErr)
			// The same problems, each with the same field and message; the API
			// server does not always list them in the same order.
			want := apierrors.NewInvalid(sluicev1alpha1.GroupVersion.WithKind("RateLimitPolicy").GroupKind(), invalid.Name, invalid.Errs)
			Expect(causes(serverErr)).To(ConsistOf(causes(want)), invalid.Name)
			if len(invalid.Errs) == 1 {
				Expect(serverErr.Error()).To(Equal(want.Error()), invalid.Name)
			}
		}
	})

	It("refuses unknown fields as strict field validation does", func() {
		doc := inNamespace("apiVersion: sluice.dev/v1alpha1\nkind: RateLimitPolicy\nmetadata: {name: typo, namespace: shop}\n" +
			"spec: {selector: {matchLabels: {app: api}}, upstreamPort: 8080, spek: 1, rules: [{name: api, limitz: [], limits: [{requests: 60, period: 1m}]}]}\n")
		_, serverErr := dryRunCreate(doc)
		Expect(apierrors.IsBadRequest(serverErr)).To(BeTrue(), "want a BadRequest error, got %v", serverErr)
		_, fileErr := policyfile.Parse([]byte(doc))
		var unknown *policyfile.UnknownFieldsError
		Expect(errors.As(fileErr, &unknown)).To(BeTrue(), "want an UnknownFieldsError, got %v", fileErr)
		GinkgoWriter.Printf("API server: %v\n", serverErr)
		Expect(serverErr.Error()).To(Equal(unknown.Error()))
	})

	It("accepts every sample and defaults it as the API server does", func() {
		samples, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "ratelimitpolicy_*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(samples).NotTo(BeEmpty())
		for _, path := range samples {
			data, err := os.ReadFile(path)
			Expect(err).NotTo(HaveOccurred())
			stored, err := dryRunCreateAs(string(data), "policy-file-"+strings.ReplaceAll(strings.TrimSuffix(filepath.Base(path), ".yaml")[len("ratelimitpolicy_"):], "_", "-"))
			Expect(err).NotTo(HaveOccurred(), path)
			_, policies, err := policyfile.Load(filesNamespace, path)
			Expect(err).NotTo(HaveOccurred(), path)
			Expect(policies).To(HaveLen(1), path)
			var fromServer sluicev1alpha1.RateLimitPolicy
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(stored.Object, &fromServer)).To(Succeed())
			Expect(policies[0].Spec).To(Equal(fromServer.Spec), path)
		}
	})
})

// causes are an Invalid error's problems, "field: message" each.
func causes(err error) []string {
	var status apierrors.APIStatus
	Expect(errors.As(err, &status)).To(BeTrue(), "%v", err)
	var out []string
	for _, c := range status.Status().Details.Causes {
		out = append(out, c.Field+": "+c.Message)
	}
	return out
}
