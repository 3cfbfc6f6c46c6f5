package config

import (
	"testing"

	. "github.com/onsi/gomega"
)

func validBan() map[string]any {
	return map[string]any{"denials": 10, "within": "1m", "durations": []any{"5m", "1h", "24h"}, "forgetAfter": "24h"}
}

func TestBansAreValidatedWithWhereAndWhy(t *testing.T) {
	cases := map[string]struct {
		edit func(b map[string]any)
		want string
	}{
		"no denials":       {func(b map[string]any) { b["denials"] = 0 }, "rules[1](api).ban.denials: must be between 1 and 10000, got 0"},
		"too many denials": {func(b map[string]any) { b["denials"] = 10001 }, "ban.denials: must be between 1 and 10000"},
		"within too long":  {func(b map[string]any) { b["within"] = "25h" }, "ban.within: must be a whole number of milliseconds between 1ms and 24h0m0s"},
		"no durations":     {func(b map[string]any) { b["durations"] = []any{} }, "ban.durations: a ban needs 1 to 8 durations, got 0"},
		"zero duration":    {func(b map[string]any) { b["durations"] = []any{"5m", "0s"} }, "ban.durations[1]: must be a whole number of milliseconds"},
		"no forgetAfter":   {func(b map[string]any) { delete(b, "forgetAfter") }, "ban.forgetAfter: must be a whole number of milliseconds"},
		"unknown field":    {func(b map[string]any) { b["level"] = 2 }, `unknown field "level"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			doc := exampleDoc(t)
			b := validBan()
			c.edit(b)
			rule(doc, 1)["ban"] = b
			_, err := Parse(marshal(t, doc))
			g.Expect(err).To(MatchError(ContainSubstring(c.want)))
		})
	}
}

func TestABanIsParsedAndAnExemptRuleHasNone(t *testing.T) {
	g := NewWithT(t)
	doc := exampleDoc(t)
	rule(doc, 1)["ban"] = validBan()
	c, err := Parse(marshal(t, doc))
	g.Expect(err).NotTo(HaveOccurred())
	b := c.Policies[0].Rules[1].Ban
	g.Expect(b).NotTo(BeNil())
	g.Expect(b.Denials).To(Equal(int64(10)))
	g.Expect(b.Durations).To(HaveLen(3))

	doc = exampleDoc(t)
	rule(doc, 0)["ban"] = validBan()
	_, err = Parse(marshal(t, doc))
	g.Expect(err).To(MatchError(ContainSubstring("ban: an exempt rule has no ban")))
}
