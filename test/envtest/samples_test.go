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
	"os"
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sluicev1alpha1 "github.com/sluice-dev/sluice/api/v1alpha1"
)

var samplesDir = filepath.Join("..", "..", "config", "samples")

// sampleFiles lists the sample policies, each one file.
func sampleFiles() []string {
	files, err := filepath.Glob(filepath.Join(samplesDir, "*.yaml"))
	if err != nil {
		panic(err)
	}
	return slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "kustomization.yaml" })
}

func sampleEntries() []TableEntry {
	var entries []TableEntry
	for _, file := range sampleFiles() {
		entries = append(entries, Entry(filepath.Base(file), file))
	}
	return entries
}

// readSample decodes a sample strictly: a field the API does not have fails.
func readSample(file string) *sluicev1alpha1.RateLimitPolicy {
	data, err := os.ReadFile(file)
	Expect(err).NotTo(HaveOccurred())
	policy := &sluicev1alpha1.RateLimitPolicy{}
	Expect(yaml.UnmarshalStrict(data, policy)).To(Succeed())
	return policy
}

var _ = Describe("Samples", func() {
	It("are all listed in config/samples/kustomization.yaml", func() {
		data, err := os.ReadFile(filepath.Join(samplesDir, "kustomization.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var kustomization struct {
			Resources []string `json:"resources"`
		}
		Expect(yaml.Unmarshal(data, &kustomization)).To(Succeed())

		var names []string
		for _, file := range sampleFiles() {
			names = append(names, filepath.Base(file))
		}
		Expect(names).NotTo(BeEmpty())
		Expect(kustomization.Resources).To(ConsistOf(names))
	})

	DescribeTable("are accepted and come back with the defaults of the API",
		func(file string) {
			policy := readSample(file)
			policy.Namespace = namespace
			Expect(k8sClient.Create(ctx, policy)).To(Succeed())

			stored := &sluicev1alpha1.RateLimitPolicy{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), stored)).To(Succeed())

			spec := stored.Spec
			Expect(spec.Mode).To(BeElementOf(sluicev1alpha1.ModeEnforce, sluicev1alpha1.ModeDryRun))
			Expect(spec.Timeout).NotTo(BeNil())
			Expect(spec.ResponseHeaders).NotTo(BeEmpty())
			for _, rule := range spec.Rules {
				Expect(rule.Algorithm).NotTo(BeEmpty(), "rule %s", rule.Name)
				Expect(rule.Cost).To(BeNumerically(">=", 1), "rule %s", rule.Name)
			}

			// The Go defaults (used where no API server is, as in the
			// compiler's tests) agree with the CRD's.
			want := readSample(file)
			want.ApplyDefaults()
			Expect(spec).To(Equal(want.Spec))
		},
		sampleEntries(),
	)
})

var _ = Describe("Defaults", func() {
	It("fill every optional setting of a minimal policy", func() {
		policy := &sluicev1alpha1.RateLimitPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "minimal", Namespace: namespace},
			Spec: sluicev1alpha1.RateLimitPolicySpec{
				Selector:     metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
				UpstreamPort: 8080,
				Storage:      &sluicev1alpha1.Storage{SecretRef: &sluicev1alpha1.SecretKeyReference{Name: "redis"}},
				Identity: &sluicev1alpha1.Identity{Sources: []sluicev1alpha1.IdentitySource{
					{APIKey: &sluicev1alpha1.APIKeySource{}},
					{JWTClaim: &sluicev1alpha1.JWTClaimSource{Claim: "sub", Keys: &sluicev1alpha1.JWTKeys{SecretRef: &sluicev1alpha1.KeySetReference{Name: "issuer"}}}},
				}},
				Rules: []sluicev1alpha1.Rule{
					{Name: "health", Exempt: true},
					{Name: "api", Limits: []sluicev1alpha1.Limit{{Requests: 60, Period: metav1.Duration{Duration: time.Minute}}}},
				},
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())

		stored := &sluicev1alpha1.RateLimitPolicy{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(policy), stored)).To(Succeed())
		spec := stored.Spec
		Expect(spec.Mode).To(Equal(sluicev1alpha1.ModeEnforce))
		Expect(spec.FailureMode).To(BeEmpty(), "the operator's --default-failure-mode applies")
		Expect(spec.Timeout).To(Equal(&metav1.Duration{Duration: 50 * time.Millisecond}))
		Expect(spec.ResponseHeaders).To(Equal(sluicev1alpha1.ResponseHeadersBoth))
		Expect(spec.Storage.SecretRef.Key).To(Equal("url"))
		Expect(spec.Identity.Sources[0].APIKey.Header).To(Equal("X-API-Key"))
		Expect(spec.Identity.Sources[1].JWTClaim.Header).To(Equal("Authorization"))
		Expect(spec.Identity.Sources[1].JWTClaim.Keys.SecretRef.Key).To(Equal("jwks.json"))
		for _, rule := range spec.Rules {
			Expect(rule.Algorithm).To(Equal(sluicev1alpha1.AlgorithmTokenBucket), "rule %s", rule.Name)
			Expect(rule.Cost).To(BeEquivalentTo(1), "rule %s", rule.Name)
		}
		Expect(spec.Rules[1].Limits[0].Burst).To(BeNil(), "burst stays unset: it means requests")
	})
})
