package enforcer

import (
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const upstreamPortNote = "the policy's upstreamPort is not used: this enforcer forwards every allowed request to --upstream"

// TestStandaloneEnforcerSaysUpstreamPortIsNotUsed runs sluice-enforcer
// --policy-file with an --upstream on another port than the policy's
// upstreamPort: it forwards to --upstream and says so once, at start, not
// at each reload.
func TestStandaloneEnforcerSaysUpstreamPortIsNotUsed(t *testing.T) {
	g := NewWithT(t)
	spec := func(limit string) string {
		return "  identity: {sources: [{header: {name: X-Tenant-ID}}]}\n  rules: [{name: all, limits: [{requests: " + limit + ", period: 1h}]}]"
	}
	app := okApp(t)
	e := start(t, setup{policies: policy("api", spec("100")), upstream: app})
	limit := func() string { return do(t, "GET", e.url, "X-Tenant-ID: reader").header.Get("X-RateLimit-Limit") }
	g.Expect(limit()).To(Equal("100"), "requests go to --upstream")
	g.Expect(e.logs.String()).To(And(ContainSubstring(upstreamPortNote), ContainSubstring(`"policy":"api","upstreamPort":8080,"upstream":"`+app+`"`)), e.logs.String())

	g.Expect(os.WriteFile(e.configPath, []byte(policy("api", spec("200"))), 0o644)).To(Succeed())
	g.Eventually(limit).WithTimeout(10 * time.Second).Should(Equal("200"))
	g.Expect(strings.Count(e.logs.String(), upstreamPortNote)).To(Equal(1), "once, at start")
}

// TestStandaloneEnforcerOnTheSamePortSaysNothing: a policy whose
// upstreamPort is --upstream's port is used as written.
func TestStandaloneEnforcerOnTheSamePortSaysNothing(t *testing.T) {
	g := NewWithT(t)
	app := okApp(t)
	u, err := url.Parse(app)
	g.Expect(err).NotTo(HaveOccurred())
	p := strings.Replace(policy("api", "  identity: {sources: [{header: {name: X-Tenant-ID}}]}\n  rules: [{name: all, limits: [{requests: 100, period: 1h}]}]"),
		"upstreamPort: 8080", "upstreamPort: "+u.Port(), 1)
	e := start(t, setup{policies: p, upstream: app})
	g.Expect(do(t, "GET", e.url, "X-Tenant-ID: reader").header.Get("X-RateLimit-Limit")).To(Equal("100"))
	g.Expect(e.logs.String()).NotTo(ContainSubstring(upstreamPortNote))
}
