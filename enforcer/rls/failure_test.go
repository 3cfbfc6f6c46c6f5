package rls

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// TestFailureModeReportsNoCount stops Redis: the Open and Closed failure
// modes decide without a count, and a descriptor's status must not make
// one up (a full limit_remaining, a window reset now) for Envoy's headers
// to pass on; LocalFallback counts in memory and reports its count.
func TestFailureModeReportsNoCount(t *testing.T) {
	rs := redistest.Start(t)
	const limits = "descriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 5}}]"
	open, closed, local := domainFor(t)+"-open", domainFor(t)+"-closed", domainFor(t)+"-local"
	in := serveOn(t, rs,
		"domain: "+open+"\nsluice: {failureMode: Open, timeout: 50ms}\n"+limits,
		"domain: "+closed+"\nsluice: {failureMode: Closed, timeout: 50ms}\n"+limits,
		"domain: "+local+"\nsluice: {failureMode: LocalFallback, timeout: 50ms}\n"+limits)
	in.call(t, open, 1, descriptor("user", "a")) // connected, scripts loaded
	rs.Stop()

	for _, hits := range []uint32{1, 0} { // a check, and a peek (hits_addend 0)
		g := NewWithT(t)
		resp := in.call(t, open, hits, descriptor("user", "a"))
		g.Expect(resp.OverallCode).To(Equal(ok), "Open admits")
		st := resp.Statuses[0]
		g.Expect(st.CurrentLimit).To(BeNil(), "hits %d: no limit reported without its count", hits)
		g.Expect(st.LimitRemaining).To(BeZero(), "hits %d: no remaining made up", hits)
		g.Expect(st.DurationUntilReset).To(BeNil(), "hits %d: no reset made up", hits)

		resp = in.call(t, closed, hits, descriptor("user", "a"))
		g.Expect(resp.OverallCode).To(Equal(overLimit), "Closed refuses")
		st = resp.Statuses[0]
		g.Expect(st.CurrentLimit).To(BeNil(), "hits %d", hits)
		g.Expect(st.DurationUntilReset.AsDuration().Seconds()).To(BeEquivalentTo(1), "Closed asks again in a second")
	}

	g := NewWithT(t)
	resp := in.call(t, local, 1, descriptor("user", "a"))
	g.Expect(resp.OverallCode).To(Equal(ok))
	g.Expect(resp.Statuses[0].CurrentLimit).NotTo(BeNil(), "LocalFallback counts, and says so")
	g.Expect(resp.Statuses[0].LimitRemaining).To(BeEquivalentTo(4))
}
