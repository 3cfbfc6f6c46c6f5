package config

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestAnswerChargesAreValidatedWithTheirPath(t *testing.T) {
	for name, c := range map[string]struct {
		algorithm string
		field     string
		value     map[string]any
		want      string
	}{
		"sliding window log": {"SlidingWindowLog", "responseCost", map[string]any{"header": "X-Cost"},
			"rules[1](api).responseCost: SlidingWindowLog cannot charge a cost after the answer"},
		"both sources": {"FixedWindow", "responseCost", map[string]any{"header": "X-Cost", "jsonUsage": "total_tokens"},
			"rules[1](api).responseCost: must set exactly one of header or jsonUsage"},
		"header not canonical": {"FixedWindow", "responseCost", map[string]any{"header": "x-cost"},
			`rules[1](api).responseCost.header: "x-cost" must be in canonical form "X-Cost"`},
		"bad status": {"FixedWindow", "countResponses", map[string]any{"statuses": []string{"4x"}},
			`rules[1](api).countResponses.statuses[0]: "4x" is not a status such as 401 or 5xx`},
		"bad gRPC code": {"FixedWindow", "countResponses", map[string]any{"grpcStatuses": []int{17}},
			"rules[1](api).countResponses.grpcStatuses[0]: 17 is not a gRPC status code"},
		"nothing to count": {"GCRA", "countResponses", map[string]any{}, "rules[1](api).countResponses: lists no statuses"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			doc := exampleDoc(t)
			rule(doc, 1)["algorithm"] = c.algorithm
			rule(doc, 1)[c.field] = c.value
			_, err := Parse(marshal(t, doc))
			g.Expect(err).To(MatchError(ContainSubstring(c.want)))
		})
	}
}

func TestCountResponsesMatches(t *testing.T) {
	g := NewWithT(t)
	c := &CountResponses{Statuses: []string{"401", "5xx"}, GRPCStatuses: []int{16}}
	g.Expect(c.MatchesHTTP(401)).To(BeTrue())
	g.Expect(c.MatchesHTTP(503)).To(BeTrue())
	g.Expect(c.MatchesHTTP(403)).To(BeFalse())
	g.Expect(c.MatchesHTTP(200)).To(BeFalse())
	g.Expect(c.MatchesHTTP(0)).To(BeFalse(), "no answer at all")
	g.Expect(c.MatchesGRPC(16)).To(BeTrue())
	g.Expect(c.MatchesGRPC(0)).To(BeFalse())
}
