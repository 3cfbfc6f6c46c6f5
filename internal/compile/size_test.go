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

package compile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/bulkpolicy"
)

// withUIDs gives policies the UIDs and generations the API server would.
func withUIDs(policies []v1alpha1.RateLimitPolicy) []v1alpha1.RateLimitPolicy {
	for i := range policies {
		policies[i].UID = types.UID(fmt.Sprintf("6f1c2d3e-0000-4000-8000-%012d", i))
		policies[i].Generation = 1
	}
	return policies
}

func thousandPolicies() []v1alpha1.RateLimitPolicy { return withUIDs(bulkpolicy.Namespace(ns, 1000)) }

func tenThousandOverrides() []v1alpha1.RateLimitPolicy {
	return withUIDs([]v1alpha1.RateLimitPolicy{*bulkpolicy.Overrides(ns, "many-overrides", 10000)})
}

// A namespace of 1,000 policies, or one policy of 10,000 overrides, is
// stored compressed, well within a ConfigMap, and decodes to the same
// document; a small one stays plain JSON.
func TestLargeConfigurationsAreCompressed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policies []v1alpha1.RateLimitPolicy
		entries  int
	}{
		{"1,000 policies", thousandPolicies(), 1000},
		{"10,000 overrides", tenThousandOverrides(), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			res, err := Namespace(ns, tc.policies, Options{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Errors).To(BeEmpty())
			g.Expect(res.Config.Policies).To(HaveLen(tc.entries))
			g.Expect(len(res.JSON)).To(BeNumerically(">", CompressAbove))
			g.Expect(res.Compressed).NotTo(BeNil())
			g.Expect(len(res.Compressed)).To(BeNumerically("<", MaxConfigBytes/8), "room to grow")
			doc, err := config.Decode(res.Compressed)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(doc).To(Equal(res.JSON), "compression is an encoding of the same document")
			t.Logf("%s: %d bytes of JSON, %d compressed", tc.name, len(res.JSON), len(res.Compressed))
		})
	}
	g := NewWithT(t)
	res, err := Namespace(ns, []v1alpha1.RateLimitPolicy{sample(t, "web")}, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Compressed).To(BeNil(), "a small configuration stays readable")
}

// The last of 10,000 overrides is compiled into its rule.
func TestTenThousandOverridesCompile(t *testing.T) {
	g := NewWithT(t)
	res, err := Namespace(ns, tenThousandOverrides(), Options{})
	g.Expect(err).NotTo(HaveOccurred())
	rule := compiledRule(g, res.Config.Policies[0], bulkpolicy.Rule)
	g.Expect(rule.Overrides).To(HaveLen(10000))
	last := rule.Overrides[9999]
	g.Expect(last.Tenant).To(Equal(bulkpolicy.Tenant(9999)))
	g.Expect(last.Limits).To(Equal([]config.Limit{{Requests: bulkpolicy.LastOverrideLimit, Period: config.Duration{Duration: time.Minute}}}))
}

// incompressible returns n bytes of hex drawn from seed, which gzip
// shrinks to about half.
func incompressible(seed, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		sum := sha256.Sum256(fmt.Appendf(nil, "%d/%d", seed, i))
		b.WriteString(hex.EncodeToString(sum[:]))
	}
	return b.String()[:n]
}

// withPaths returns a policy whose rules match many long paths, about
// size bytes of them, path k's text being fill(k, length).
func withPaths(t *testing.T, size int, fill func(k, n int) string) v1alpha1.RateLimitPolicy {
	p := sample(t, "web")
	const rules, perRule = 64, 16
	n := size / rules / perRule
	for i := range rules {
		rule := v1alpha1.Rule{Name: fmt.Sprintf("r%02d", i),
			Limits: []v1alpha1.Limit{{Requests: 1, Period: metav1.Duration{Duration: time.Second}}},
			Match:  &v1alpha1.RequestMatch{}}
		for j := range perRule {
			rule.Match.Paths = append(rule.Match.Paths, v1alpha1.PathMatch{Prefix: "/" + fill(i*perRule+j, n)})
		}
		p.Spec.Rules = append(p.Spec.Rules, rule)
	}
	return p
}

// A configuration that does not fit a ConfigMap even compressed is refused
// whole, saying how large it is against the limit.
func TestTooLarge(t *testing.T) {
	g := NewWithT(t)
	p := withPaths(t, 2*MaxConfigBytes+MaxConfigBytes/2, incompressible)
	res, err := Namespace(ns, []v1alpha1.RateLimitPolicy{p}, Options{})
	g.Expect(res.Errors).To(BeEmpty())
	var tooLarge *TooLargeError
	g.Expect(errors.As(err, &tooLarge)).To(BeTrue())
	g.Expect(tooLarge.Compressed).To(BeNumerically(">", MaxConfigBytes))
	g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("is %d bytes compressed (%d of JSON), more than the 1048576 a ConfigMap holds", tooLarge.Compressed, len(res.JSON))))
	g.Expect(err.Error()).To(ContainSubstring("move some policies to other namespaces"))
	g.Expect(res.JSON).To(HaveLen(tooLarge.Size))
}

// A configuration that compresses into a ConfigMap but inflates past what
// enforcers read is refused too: they would refuse it.
func TestTooLargeToRead(t *testing.T) {
	g := NewWithT(t)
	p := withPaths(t, config.MaxDocumentBytes+1, func(_, n int) string { return strings.Repeat("x", n) })
	_, err := Namespace(ns, []v1alpha1.RateLimitPolicy{p}, Options{})
	var tooLarge *TooLargeError
	g.Expect(errors.As(err, &tooLarge)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("bytes of JSON, more than the 16777216 enforcers read"))
}

// Overrides that do not fit their rule are the compiler's to refuse (the
// API server's validation rules check each override alone); 10,000 wrong
// alike make one message of bounded length.
func TestOverrideProblems(t *testing.T) {
	g := NewWithT(t)
	p := tenThousandOverrides()[0]
	p.Spec.Overrides[9999].Rule = "exprts"
	_, err := Policy(&p, Options{})
	g.Expect(err).To(MatchError(ContainSubstring("spec.overrides[9999](" + bulkpolicy.Tenant(9999) + "): an override names rule exprts, which does not exist")))

	p = tenThousandOverrides()[0]
	p.Spec.Overrides[9999].Tenant = bulkpolicy.Tenant(17)
	_, err = Policy(&p, Options{})
	g.Expect(err).To(MatchError(ContainSubstring("spec.overrides[9999](" + bulkpolicy.Tenant(17) + "): spec.overrides[17] is also for tenant " +
		bulkpolicy.Tenant(17) + " and rule api: keep one override per tenant and rule")))

	p = tenThousandOverrides()[0]
	p.Spec.Rules[0].Algorithm = v1alpha1.AlgorithmSlidingWindowLog
	p.Spec.Overrides[0].Limits[0].Requests = 1000000
	for i := range p.Spec.Overrides {
		p.Spec.Overrides[i].Limits[0].Burst = new(int64(5))
	}
	_, err = Policy(&p, Options{})
	var pe *PolicyError
	g.Expect(errors.As(err, &pe)).To(BeTrue())
	g.Expect(pe.Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
	g.Expect(pe.Message).To(HavePrefix("spec.overrides[0](" + bulkpolicy.Tenant(0) + "): an override of rule api sets burst"))
	g.Expect(pe.Message).To(HaveSuffix("; and 9995 more overrides"))
	g.Expect(len(pe.Message)).To(BeNumerically("<", 2048))
}

// go test -bench Compile -run '^$' ./internal/compile/ (docs/performance.md).
func BenchmarkCompile(b *testing.B) {
	for _, bc := range []struct {
		name     string
		policies []v1alpha1.RateLimitPolicy
	}{
		{"policies=1000", thousandPolicies()},
		{"overrides=10000", tenThousandOverrides()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var res *Result
			for b.Loop() {
				var err error
				if res, err = Namespace(ns, bc.policies, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(res.JSON)), "json-bytes")
			b.ReportMetric(float64(len(res.Compressed)), "gzip-bytes")
		})
	}
}
