package policyfile

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestLoadReadsAFolderAsKubectlApplyDoes(t *testing.T) {
	g := NewWithT(t)
	_, policies, err := Load("demo", "../../config/samples/")
	g.Expect(err).NotTo(HaveOccurred(), "kustomization.yaml is kustomize's own file, not a policy")
	samples, _ := filepath.Glob("../../config/samples/ratelimitpolicy_*.yaml")
	g.Expect(policies).To(HaveLen(len(samples)))

	dir := t.TempDir()
	write := func(name, data string) {
		g.Expect(os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644)).To(Succeed())
	}
	write("b.yml", policy("b", `{`+selector+`, rules: [`+apiRule+`]}`))
	write("a.json", `{"apiVersion": "sluice.dev/v1alpha1", "kind": "RateLimitPolicy", "metadata": {"name": "a"},
		"spec": {"selector": {"matchLabels": {"app": "api"}}, "upstreamPort": 8080, "rules": [{"name": "api", "limits": [{"requests": 60, "period": "1m"}]}]}}`)
	write("README.md", "not a manifest")
	write("sub/c.yaml", "kubectl -f without -R does not read subfolders")
	_, policies, err = Load("demo", dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(policies).To(HaveLen(2))
	g.Expect(policies[0].Name).To(Equal("a"), "files in name order")
	g.Expect(policies[1].Name).To(Equal("b"))

	_, _, err = Load("demo", filepath.Join(dir, "sub", ".."), t.TempDir())
	g.Expect(err).To(MatchError(ContainSubstring("has no .yaml, .yml or .json file")))
}
