package rules

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/request"
)

// adaptiveShop is the example configuration with every limited rule of
// public-api adaptive.
func adaptiveShop(t *testing.T) *Table {
	t.Helper()
	c, err := config.Load("../config/testdata/shop.json")
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Policies[0].Rules {
		if r := &c.Policies[0].Rules[i]; !r.Exempt {
			r.Adaptive = &config.Adaptive{ErrorRate: 500, Minimum: 2500, Interval: config.Duration{Duration: time.Second}}
		}
	}
	table, err := New(c.ForPod(map[string]string{"app": "api", "tier": "admin"}))
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func adaptiveCheckOf(t *testing.T, table *Table, req *request.Request, rule string) Check {
	for _, c := range table.Checks(req, nil) {
		if c.Policy.Name == "public-api" && c.Rule.Name == rule {
			return c
		}
	}
	t.Fatalf("rule %s does not apply", rule)
	return Check{}
}

// ruleOf is the rule of public-api named name.
func ruleOf(table *Table, name string) *Rule {
	for _, r := range table.Policies()[0].Rules {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// adaptiveRuleOf is the adaptive state of the rule of public-api named name.
func adaptiveRuleOf(table *Table, name string) *Scaling {
	return table.Scaling(ruleOf(table, name))
}

func TestFactorScalesLimitsTiersAndOverrides(t *testing.T) {
	g := NewWithT(t)
	table := adaptiveShop(t)
	acme := bearer(`{"tenant_id":"acme"}`)
	premium := newRequest("GET", "/v1/orders", "X-API-Key: k1", "X-Plan: premium")
	exports := newRequest("POST", "/v1/exports/monthly", acme)
	g.Expect(adaptiveCheckOf(t, table, premium, "plans").Request.Windows).To(Equal([]limiter.Window{{Requests: 5000, Period: time.Hour}}))

	for _, name := range []string{"api", "plans", "exports"} {
		g.Expect(adaptiveRuleOf(table, name).SetFactor(4900)).To(Succeed())
	}
	g.Expect(adaptiveCheckOf(t, table, premium, "plans").Request.Windows).To(Equal([]limiter.Window{{Requests: 2450, Period: time.Hour}}), "a tier")
	g.Expect(adaptiveCheckOf(t, table, premium, "api").Request.Windows).To(Equal([]limiter.Window{{Requests: 29, Period: time.Minute, Burst: 29}}),
		"requests and burst, rounded down")
	g.Expect(adaptiveCheckOf(t, table, exports, "exports").Request.Windows).To(Equal([]limiter.Window{{Requests: 490, Period: time.Minute}}),
		"an override")
	g.Expect(adaptiveRuleOf(table, "api").Factor()).To(Equal(config.BasisPoints(4900)))

	g.Expect(adaptiveRuleOf(table, "api").SetFactor(100)).To(Succeed())
	g.Expect(adaptiveRuleOf(table, "api").Factor()).To(Equal(config.BasisPoints(2500)), "never below the minimum")
	g.Expect(adaptiveRuleOf(table, "api").Windows()).To(Equal([]limiter.Window{{Requests: 15, Period: time.Minute, Burst: 15}}))

	// a reload carries the factor into the new table
	next := adaptiveShop(t)
	g.Expect(adaptiveRuleOf(next, "api").Adopt(adaptiveRuleOf(table, "api"))).To(Succeed())
	g.Expect(adaptiveRuleOf(next, "api").Windows()).To(Equal([]limiter.Window{{Requests: 15, Period: time.Minute, Burst: 15}}))
	g.Expect(adaptiveRuleOf(next, "api").Meter()).To(BeIdenticalTo(adaptiveRuleOf(table, "api").Meter()), "measurements not sent yet carry over")

	g.Expect(adaptiveRuleOf(table, "api").SetFactor(config.Full)).To(Succeed())
	g.Expect(adaptiveCheckOf(t, table, premium, "api").Request.Windows).To(Equal([]limiter.Window{{Requests: 60, Period: time.Minute, Burst: 60}}),
		"back in full")
	g.Expect(adaptiveRuleOf(table, "api").Windows()).To(Equal(ruleOf(table, "api").ConfiguredWindows()))
}

func TestRulesWithoutAdaptiveKeepTheirLimits(t *testing.T) {
	g := NewWithT(t)
	table := shop(t)
	r := adaptiveRuleOf(table, "api")
	g.Expect(r).To(BeNil(), "no adaptive state")
	g.Expect(r.Adaptive()).To(BeNil())
	g.Expect(r.Meter()).To(BeNil())
	g.Expect(r.SetFactor(2500)).To(Succeed())
	g.Expect(r.Factor()).To(Equal(config.Full))
	g.Expect(ruleOf(table, "api").ConfiguredWindows()).To(Equal([]limiter.Window{{Requests: 60, Period: time.Minute, Burst: 60}}))
}

// A scaled rule is the configured rule under other windows: its ban and
// its delay still apply.
func TestAScaledRuleKeepsItsBanAndDelay(t *testing.T) {
	g := NewWithT(t)
	c, err := config.Load("../config/testdata/shop.json")
	g.Expect(err).NotTo(HaveOccurred())
	for i := range c.Policies[0].Rules {
		if r := &c.Policies[0].Rules[i]; r.Name == "api" {
			r.Adaptive = &config.Adaptive{ErrorRate: 500, Minimum: 2500, Interval: config.Duration{Duration: time.Second}}
			r.Ban = &config.Ban{Denials: 3, Within: config.Duration{Duration: time.Minute},
				Durations: []config.Duration{{Duration: time.Hour}}, ForgetAfter: config.Duration{Duration: time.Hour}}
			r.OnLimit = &config.OnLimit{Delay: &config.Delay{Max: config.Duration{Duration: time.Second}, MaxQueued: 10}}
		}
	}
	table, err := New(c.ForPod(map[string]string{"app": "api", "tier": "admin"}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(adaptiveRuleOf(table, "api").SetFactor(5000)).To(Succeed())
	req := adaptiveCheckOf(t, table, newRequest("GET", "/v1/orders", "X-API-Key: k1"), "api").Request
	g.Expect(req.Windows).To(Equal([]limiter.Window{{Requests: 30, Period: time.Minute, Burst: 30}}))
	g.Expect(req.Ban).NotTo(BeNil())
	g.Expect(req.Ban.Denials).To(Equal(int64(3)))
	g.Expect(req.Delay).To(Equal(time.Second))
}
