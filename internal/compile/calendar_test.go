package compile

import (
	"errors"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

// planRule makes the sample public-api's rule api a FixedWindow rule with
// limits, returning the policy.
func planRule(t *testing.T, limits ...v1alpha1.Limit) v1alpha1.RateLimitPolicy {
	p := sample(t, "public-api")
	i := slices.IndexFunc(p.Spec.Rules, func(r v1alpha1.Rule) bool { return r.Name == "api" })
	if i < 0 {
		t.Fatal("sample public-api has no rule api")
	}
	p.Spec.Rules[i].Algorithm = v1alpha1.AlgorithmFixedWindow
	p.Spec.Rules[i].Limits = limits
	p.Spec.Overrides = nil
	return p
}

func TestCalendarLimitsReachTheConfig(t *testing.T) {
	g := NewWithT(t)
	p := planRule(t,
		v1alpha1.Limit{Requests: 60, Period: metav1.Duration{Duration: time.Minute}},
		v1alpha1.Limit{Requests: 1000, Calendar: &v1alpha1.Calendar{Unit: v1alpha1.CalendarDay, TimeZone: "Europe/Berlin"}},
		v1alpha1.Limit{Requests: 10000, Calendar: &v1alpha1.Calendar{Unit: v1alpha1.CalendarWeek, WeekStart: "Sunday"}},
	)
	res, err := Namespace(ns, []v1alpha1.RateLimitPolicy{p}, Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Errors).To(BeEmpty())
	parsed, err := config.Parse(res.JSON)
	g.Expect(err).NotTo(HaveOccurred(), "the enforcer accepts what the compiler writes")
	api := compiledRule(g, parsed.Policies[0], "api")
	g.Expect(api.Limits).To(HaveLen(3))
	g.Expect(api.Limits[0].Calendar).To(BeNil())
	g.Expect(api.Limits[1].Period.Duration).To(BeZero())
	g.Expect(api.Limits[1].Calendar.Label()).To(Equal("day@Europe/Berlin"))
	g.Expect(api.Limits[2].Calendar.Label()).To(Equal("week-sunday@UTC"))
}

func TestUnknownTimeZoneIsNamedInTheAcceptedCondition(t *testing.T) {
	g := NewWithT(t)
	p := planRule(t, v1alpha1.Limit{Requests: 10000, Calendar: &v1alpha1.Calendar{Unit: v1alpha1.CalendarMonth, TimeZone: "Europe/Berlim"}})
	_, err := Policy(&p, Options{})
	var perr *PolicyError
	g.Expect(errors.As(err, &perr)).To(BeTrue(), "%v", err)
	g.Expect(perr.Reason).To(Equal(v1alpha1.ReasonInvalidSpec))
	g.Expect(perr.Message).To(ContainSubstring(`spec.rules[0](api).limits[0].calendar.timeZone: time zone "Europe/Berlim" is not a known IANA time zone name`))
}
