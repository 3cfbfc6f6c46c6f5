package compile

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

func TestDelayCompiles(t *testing.T) {
	g := NewWithT(t)
	p := sample(t, "public-api")
	compiled, err := Policy(&p, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	search := compiledRule(g, compiled, "search")
	g.Expect(search.OnLimit).To(Equal(&config.OnLimit{Delay: &config.Delay{
		Max: config.Duration{Duration: 500 * time.Millisecond}, MaxQueued: v1alpha1.DefaultDelayMaxQueued}}),
		"maxQueued resolved to its default")
	g.Expect(compiledRule(g, compiled, "api").OnLimit).To(BeNil(), "a rule without onLimit compiles as before")

	queued := int32(7)
	for i := range p.Spec.Rules {
		if p.Spec.Rules[i].Name == "search" {
			p.Spec.Rules[i].OnLimit.Delay = &v1alpha1.Delay{Max: metav1.Duration{Duration: 2 * time.Second}, MaxQueued: &queued}
		}
	}
	compiled, err = Policy(&p, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(compiledRule(g, compiled, "search").OnLimit.Delay).To(Equal(&config.Delay{
		Max: config.Duration{Duration: 2 * time.Second}, MaxQueued: 7}))
}

func TestDelayOnAWindowAlgorithmIsAProblem(t *testing.T) {
	g := NewWithT(t)
	p := sample(t, "public-api")
	for i := range p.Spec.Rules {
		if p.Spec.Rules[i].Name == "search" {
			p.Spec.Rules[i].Algorithm = v1alpha1.AlgorithmSlidingWindowLog
			for j := range p.Spec.Rules[i].Limits {
				p.Spec.Rules[i].Limits[j].Burst = nil
			}
		}
	}
	_, err := Policy(&p, Options{})
	g.Expect(err).To(MatchError(ContainSubstring("onLimit.delay: SlidingWindowLog cannot book future capacity exactly")))
}
