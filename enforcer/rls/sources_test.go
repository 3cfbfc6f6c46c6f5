package rls

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/rls/erlconfig"
	"github.com/sluice-dev/sluice/enforcer/status"
)

// Each policy counts the calls it decided, as an enforcer counts requests:
// refused, refused only by a shadow_mode rule, or admitted.
func TestDecisionsPerPolicy(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+"\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 1}}, {key: ip, shadow_mode: true, rate_limit: {unit: hour, requests_per_unit: 1}}]")
	in.call(t, domain, 0, descriptor("user", "ann"))
	in.call(t, domain, 0, descriptor("user", "ann"))
	in.call(t, domain, 0, descriptor("ip", "1"))
	in.call(t, domain, 0, descriptor("ip", "1"))
	in.call(t, domain, 0, descriptor("other", "x")) // no rule: no policy decided it
	in.call(t, "unknown", 0, descriptor("user", "ann"))
	g.Expect(in.svc.Decisions()).To(Equal(map[string]status.DecisionCounts{domain: {Allowed: 2, Denied: 1, WouldDeny: 1}}))
}

// Configurations applied together keep their namespaces; a domain in two
// is refused and the table in service stays.
func TestApplyAll(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+"\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 1}}]")
	compile := func(ns, file string) *config.Config {
		f, err := erlconfig.Parse("f.yaml", []byte(file))
		g.Expect(err).NotTo(HaveOccurred())
		cfg, err := erlconfig.Compile([]*erlconfig.File{f}, erlconfig.Options{Namespace: ns})
		g.Expect(err).NotTo(HaveOccurred())
		return cfg
	}
	mine := compile("a", "domain: "+domain+"-a\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 1}}]")
	theirs := compile("b", "domain: "+domain+"-b\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 1}}]")
	g.Expect(in.svc.ApplyAll(context.Background(), mine, theirs)).To(Succeed())
	for _, d := range []string{domain + "-a", domain + "-b"} {
		g.Expect(in.call(t, d, 0, descriptor("user", "ann")).OverallCode).To(Equal(ok))
		g.Expect(in.call(t, d, 0, descriptor("user", "ann")).OverallCode).To(Equal(overLimit))
	}
	ks, err := rdb(t).Keys(context.Background(), "sl:{b/"+domain+"-b/*").Result()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ks).NotTo(BeEmpty(), "in its own namespace")

	again := compile("c", "domain: "+domain+"-a\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 9}}]")
	g.Expect(in.svc.ApplyAll(context.Background(), mine, again)).To(MatchError(ContainSubstring(domain + "-a defined by two configurations")))
	g.Expect(in.call(t, domain+"-b", 0, descriptor("user", "ann")).OverallCode).To(Equal(overLimit), "the table in service stays")
}
