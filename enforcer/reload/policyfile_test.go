package reload

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

const twoPolicies = `# the public API
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: public-api, namespace: shop}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  rules:
    - name: api
      limits: [{requests: 60, period: 1m}]
---
# comments only
---
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: login}
spec:
  selector: {}
  upstreamPort: 8080
  failureMode: Closed
  rules:
    - name: login
      limits: [{requests: 5, period: 1m}]
`

func TestParsePolicies(t *testing.T) {
	g := NewWithT(t)
	ps, err := ParsePolicies([]byte(twoPolicies))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ps).To(HaveLen(2))
	g.Expect(ps[0].Name).To(Equal("public-api"))
	g.Expect(ps[0].Spec.Mode).To(Equal(v1alpha1.ModeEnforce), "defaults applied")
	g.Expect(ps[0].Spec.FailureMode).To(BeEmpty(), "the compiler applies the default failure mode")
	g.Expect(ps[0].Spec.Rules[0].Algorithm).To(Equal(v1alpha1.DefaultAlgorithm))
	g.Expect(ps[1].Spec.FailureMode).To(Equal(v1alpha1.FailureModeClosed))

	for in, want := range map[string]string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n":                                  "want apiVersion sluice.dev/v1alpha1 and kind RateLimitPolicy",
		"apiVersion: sluice.dev/v1alpha1\nkind: RateLimitPolicy\nspec: {rules: []}\n":             "metadata.name is required",
		"apiVersion: sluice.dev/v1alpha1\nkind: RateLimitPolicy\nmetadata: {name: x}\nspek: {}\n": `unknown field "spek"`,
		"apiVersion: sluice.dev/v1alpha1\n  kind: [":                                              "document 1",
	} {
		_, err := ParsePolicies([]byte(in))
		g.Expect(err).To(MatchError(ContainSubstring(want)), in)
	}
}

func TestLoadPoliciesNamespace(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	g.Expect(os.WriteFile(a, []byte(twoPolicies), 0o644)).To(Succeed())
	ns, ps, err := LoadPolicies("", a)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ns).To(Equal("shop"))
	g.Expect(ps[1].Namespace).To(Equal("shop"))
	g.Expect(string(ps[1].UID)).To(Equal("file:shop/login"), "stable across processes, so they hash tenants alike")
	g.Expect(ps[1].Generation).To(Equal(int64(1)))

	_, _, err = LoadPolicies("", a, a)
	g.Expect(err).To(MatchError(ContainSubstring(`policy "public-api" is defined twice`)))

	g.Expect(os.WriteFile(b, []byte("apiVersion: sluice.dev/v1alpha1\nkind: RateLimitPolicy\nmetadata: {name: other, namespace: web}\nspec: {selector: {}, upstreamPort: 1, rules: []}\n"), 0o644)).To(Succeed())
	_, _, err = LoadPolicies("", a, b)
	g.Expect(err).To(MatchError(ContainSubstring("policy web/other is not in namespace shop")))

	ns, _, err = LoadPolicies("team", b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ns).To(Equal("web"))
}
