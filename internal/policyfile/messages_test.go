package policyfile

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
)

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

func TestAJSONUsagePathSaysToNameTheField(t *testing.T) {
	g := NewWithT(t)
	_, err := Parse([]byte(policy("llm", `{`+selector+`, rules: [{name: llm, limits: [{requests: 1000, period: 1h}], responseCost: {jsonUsage: usage.total_tokens}}]}`)))
	g.Expect(err).To(MatchError(And(
		ContainSubstring(`spec.rules[0].responseCost.jsonUsage: Invalid value: "usage.total_tokens": jsonUsage names the field inside usage, such as total_tokens`),
		Not(ContainSubstring("should match")))))
}
