package policyfile

import (
	"errors"
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

func TestUnquotedStatusesAreRefusedWithTheFixAndTheRestChecked(t *testing.T) {
	g := NewWithT(t)
	_, err := Parse([]byte(policy("auth", `{`+selector+`, rules: [{name: login, limits: [{requests: 5, period: 1d}], countResponses: {statuses: [401, 403]}}]}`)))
	var invalid *InvalidError
	g.Expect(errors.As(err, &invalid)).To(BeTrue(), "%v", err)
	var got []string
	for _, e := range invalid.Errs {
		got = append(got, e.Error())
	}
	g.Expect(got).To(ConsistOf(
		`spec.rules[0].countResponses.statuses[0]: Invalid value: 401: write HTTP statuses as quoted strings, such as "401" or "5xx"`,
		`spec.rules[0].countResponses.statuses[1]: Invalid value: 403: write HTTP statuses as quoted strings, such as "401" or "5xx"`,
		`spec.rules[0].limits[0].period: Invalid value: "1d": period must be a duration such as 30s, 1m, 1h or 24h; there is no day unit: write 24h for a day`,
	), "the CEL rules still run: every problem of the file in one pass")
}

func TestRulesNotCheckedAreSaidInWords(t *testing.T) {
	g := NewWithT(t)
	_, err := Parse([]byte(policy("p", `{`+selector+`, mode: Sometimes, rules: [`+apiRule+`]}`)))
	g.Expect(err).To(MatchError(And(
		ContainSubstring(`spec.mode: Unsupported value: "Sometimes"`),
		ContainSubstring("\n  some validation rules were not checked because of the problems above: correct them and check again"),
		Not(ContainSubstring("<nil>")))))
}
