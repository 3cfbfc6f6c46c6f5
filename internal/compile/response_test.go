package compile

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

func TestAnswerChargesCompile(t *testing.T) {
	g := NewWithT(t)
	p := sample(t, "public-api")
	for i := range p.Spec.Rules {
		switch r := &p.Spec.Rules[i]; r.Name {
		case "api":
			r.ResponseCost = &v1alpha1.ResponseCost{Header: "x-sluice-cost"}
		case "search":
			r.OnLimit = nil
			r.CountResponses = &v1alpha1.CountResponses{Statuses: []string{"401", "5xx"},
				GRPCStatuses: []v1alpha1.GRPCCode{"UNAUTHENTICATED", "PERMISSION_DENIED"}}
		}
	}
	compiled, err := Policy(&p, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(compiledRule(g, compiled, "api").ResponseCost).To(Equal(&config.ResponseCost{Header: "X-Sluice-Cost"}),
		"the header in the canonical form the enforcer looks it up by")
	g.Expect(compiledRule(g, compiled, "search").CountResponses).To(Equal(&config.CountResponses{
		Statuses: []string{"401", "5xx"}, GRPCStatuses: []int{16, 7}}))
}

func TestResponseCostOnSlidingWindowLogIsAProblem(t *testing.T) {
	g := NewWithT(t)
	p := sample(t, "public-api")
	for i := range p.Spec.Rules {
		if r := &p.Spec.Rules[i]; r.Name == "api" {
			r.Algorithm = v1alpha1.AlgorithmSlidingWindowLog
			for j := range r.Limits {
				r.Limits[j].Burst = nil
			}
			r.ResponseCost = &v1alpha1.ResponseCost{Header: "X-Cost"}
		}
	}
	_, err := Policy(&p, Options{})
	g.Expect(err).To(MatchError(ContainSubstring("spec.rules[")))
	g.Expect(err).To(MatchError(ContainSubstring("(api).responseCost: SlidingWindowLog cannot charge a cost after the answer")))
}
