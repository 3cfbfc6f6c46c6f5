package config

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestParsePercent(t *testing.T) {
	for in, want := range map[string]BasisPoints{"25%": 2500, "0.1%": 10, "5.25%": 525, "100%": 10000, "0%": 0} {
		g := NewWithT(t)
		got, err := ParsePercent(in)
		g.Expect(err).NotTo(HaveOccurred(), in)
		g.Expect(got).To(Equal(want), in)
	}
	for _, in := range []string{"25", "%", "-5%", "1.125%", "a%", "1e2%"} {
		_, err := ParsePercent(in)
		NewWithT(t).Expect(err).To(HaveOccurred(), in)
	}
	g := NewWithT(t)
	g.Expect(BasisPoints(2500).String()).To(Equal("25%"))
	g.Expect(BasisPoints(4900).String()).To(Equal("49%"))
	g.Expect(BasisPoints(10).String()).To(Equal("0.1%"))
	g.Expect(BasisPoints(7215).String()).To(Equal("72.15%"))
}

func TestAdaptiveIsValidated(t *testing.T) {
	valid := func() map[string]any {
		return map[string]any{"latency": "250ms", "errorRate": 500, "minimum": 2500, "interval": "10s"}
	}
	cases := map[string]struct {
		edit func(a map[string]any)
		want string
	}{
		"no target": {func(a map[string]any) { delete(a, "latency"); delete(a, "errorRate") },
			"rules[1](api).adaptive.target: needs latency, errorRate or both"},
		"latency too long": {func(a map[string]any) { a["latency"] = "2m" }, "adaptive.target.latency: must be between 1ms and 60s, got 2m0s"},
		"error rate too low": {func(a map[string]any) { a["errorRate"] = 5 },
			"adaptive.target.errorRate: must be between 0.1% and 100%, got 0.05%"},
		"minimum above full": {func(a map[string]any) { a["minimum"] = 12000 }, "adaptive.minimum: must be between 1% and 100%, got 120%"},
		"minimum unparsable": {func(a map[string]any) { a["minimum"] = -1 }, "adaptive.minimum: must be between 1% and 100%"},
		"fractional interval": {func(a map[string]any) { a["interval"] = "1500ms" },
			"adaptive.interval: must be a whole number of seconds between 1s and 10m, got 1.5s"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			doc := exampleDoc(t)
			a := valid()
			rule(doc, 1)["adaptive"] = a
			_, err := Parse(marshal(t, doc))
			g.Expect(err).NotTo(HaveOccurred(), "the valid settings parse")
			c.edit(a)
			_, err = Parse(marshal(t, doc))
			g.Expect(err).To(MatchError(ContainSubstring(c.want)))
		})
	}
	t.Run("exempt", func(t *testing.T) {
		g := NewWithT(t)
		doc := exampleDoc(t)
		rule(doc, 0)["adaptive"] = valid()
		_, err := Parse(marshal(t, doc))
		g.Expect(err).To(MatchError(ContainSubstring("rules[0](health).adaptive: an exempt rule has no limits to adapt")))
	})
}
