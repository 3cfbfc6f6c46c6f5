package admin

import (
	"net/http"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

const (
	resetBob = "/tenant?policy=api&rule=all&tenant=bob"
	// liftAcme passes authorization to a 404: policy api has no ban.
	liftAcme = "/bans?policy=api&rule=all&tenant=acme"
	// istioPeer is where an Istio sidecar forwards remote callers from.
	istioPeer = "127.0.0.6:41234"
)

// exhaustBob spends tenant bob's 5 an hour and checks he is refused.
func exhaustBob(g Gomega, f *fixture) {
	for range 5 {
		fetch(g, f.proxy+"/x", "X-Tenant: bob")
	}
	code, _ := fetch(g, f.proxy+"/x", "X-Tenant: bob")
	g.Expect(code).To(Equal(http.StatusTooManyRequests), "bob used his 5 an hour")
}

func TestWritesWithoutATokenAreRefusedEvenFromLoopback(t *testing.T) {
	g := NewWithT(t)
	f := startWith(t, twoPolicies(t), redisURL, nil)
	exhaustBob(g, f)
	for _, remote := range []string{"127.0.0.1:41234", "[::1]:41234", istioPeer} {
		for _, path := range []string{resetBob, liftAcme} {
			w := sendFrom(f.server, remote, http.MethodDelete, path, "")
			g.Expect(w.Code).To(Equal(http.StatusForbidden), "DELETE %s from %s: %s", path, remote, w.Body.String())
			g.Expect(w.Body.String()).To(And(ContainSubstring("--write-token-file"), ContainSubstring("--admin-trusted-peer")),
				"the refusal says how to allow writes")
		}
	}
	code, _ := fetch(g, f.proxy+"/x", "X-Tenant: bob")
	g.Expect(code).To(Equal(http.StatusTooManyRequests), "no refused reset deleted bob's counters")

	// Reads stay with the pod's own loopback address, not a mesh's.
	g.Expect(sendFrom(f.server, "127.0.0.1:41234", http.MethodGet, "/status", "").Code).To(Equal(http.StatusOK))
	g.Expect(sendFrom(f.server, "[::1]:41234", http.MethodGet, "/bans?policy=api", "").Code).To(Equal(http.StatusNotFound))
	for _, path := range []string{"/status", "/bans?policy=api", "/debug/tenant?policy=api&rule=all&tenant=bob"} {
		w := sendFrom(f.server, istioPeer, http.MethodGet, path, "")
		g.Expect(w.Code).To(Equal(http.StatusForbidden), "GET %s from %s", path, istioPeer)
		g.Expect(w.Body.String()).NotTo(ContainSubstring("remaining"))
		g.Expect(w.Body.String()).To(ContainSubstring("--status-token-file"))
	}
}

func TestTheTrustedPeerAloneMayWriteWithoutAToken(t *testing.T) {
	g := NewWithT(t)
	peers, err := ParsePeers([]string{"127.0.0.1"})
	g.Expect(err).NotTo(HaveOccurred())
	f := startWithAccess(t, twoPolicies(t), redisURL, func(o *Options) { o.TrustedPeers = peers })
	exhaustBob(g, f)
	for _, remote := range []string{istioPeer, "[::1]:41234", "127.0.0.2:41234", "10.244.1.7:41234"} {
		for _, c := range []struct{ method, path string }{{http.MethodDelete, resetBob}, {http.MethodDelete, liftAcme}, {http.MethodGet, "/status"}} {
			w := sendFrom(f.server, remote, c.method, c.path, "")
			g.Expect(w.Code).To(Equal(http.StatusForbidden), "%s %s from %s: %s", c.method, c.path, remote, w.Body.String())
			g.Expect(w.Body.String()).To(ContainSubstring("--admin-trusted-peer"))
		}
	}
	code, _ := fetch(g, f.proxy+"/x", "X-Tenant: bob")
	g.Expect(code).To(Equal(http.StatusTooManyRequests), "no refused reset deleted bob's counters")

	g.Expect(sendFrom(f.server, "[::ffff:127.0.0.1]:41234", http.MethodDelete, liftAcme, "").Code).To(Equal(http.StatusNotFound),
		"127.0.0.1 as an IPv4-mapped IPv6 address is that peer")
	w := sendFrom(f.server, "127.0.0.1:41234", http.MethodDelete, resetBob, "")
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	code, _ = fetch(g, f.proxy+"/x", "X-Tenant: bob")
	g.Expect(code).To(Equal(http.StatusOK), "the trusted peer's reset started bob afresh")
	g.Expect(sendFrom(f.server, "127.0.0.1:41234", http.MethodGet, "/status", "").Code).To(Equal(http.StatusOK))
}

func TestTheReadTokenCannotWrite(t *testing.T) {
	g := NewWithT(t)
	f := startWithAccess(t, twoPolicies(t), redisURL, readWrite)
	exhaustBob(g, f)
	for _, remote := range []string{"10.244.1.7:41234", "127.0.0.1:41234"} {
		for _, path := range []string{resetBob, liftAcme} {
			w := sendFrom(f.server, remote, http.MethodDelete, path, "r")
			g.Expect(w.Code).To(Equal(http.StatusForbidden), "DELETE %s from %s with the read token: %s", path, remote, w.Body.String())
			g.Expect(w.Body.String()).To(ContainSubstring("write token"))
			g.Expect(sendFrom(f.server, remote, http.MethodDelete, path, "").Code).To(Equal(http.StatusUnauthorized),
				"loopback presents the token too")
		}
	}
	code, _ := fetch(g, f.proxy+"/x", "X-Tenant: bob")
	g.Expect(code).To(Equal(http.StatusTooManyRequests), "the read token deleted nothing")

	for _, token := range []string{"r", "t"} {
		for _, path := range []string{"/status", "/debug/tenant?policy=api&rule=all&tenant=bob"} {
			g.Expect(send(f.server, http.MethodGet, path, token).Code).To(Equal(http.StatusOK), "GET %s with token %s", path, token)
		}
	}
	g.Expect(send(f.server, http.MethodDelete, liftAcme, "t").Code).To(Equal(http.StatusNotFound), "the write token passes to the handler")
	w := send(f.server, http.MethodDelete, resetBob, "t")
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	code, _ = fetch(g, f.proxy+"/x", "X-Tenant: bob")
	g.Expect(code).To(Equal(http.StatusOK), "the write token's reset started bob afresh")
}

func TestAReadTokenAloneGrantsNoWrite(t *testing.T) {
	g := NewWithT(t)
	f := startWith(t, twoPolicies(t), redisURL, staticToken("r"))
	for _, remote := range []string{"10.244.1.7:41234", "127.0.0.1:41234"} {
		w := sendFrom(f.server, remote, http.MethodDelete, resetBob, "r")
		g.Expect(w.Code).To(Equal(http.StatusForbidden), "from %s: %s", remote, w.Body.String())
		g.Expect(w.Body.String()).To(ContainSubstring("--write-token-file"))
	}
	g.Expect(send(f.server, http.MethodGet, "/status", "r").Code).To(Equal(http.StatusOK))
}

func TestAWriteTokenNotLoadedYetIsUnavailable(t *testing.T) {
	g := NewWithT(t)
	f := startWithAccess(t, twoPolicies(t), redisURL, func(o *Options) {
		o.StatusToken, o.WriteToken = staticToken("r"), &TokenFile{Path: t.TempDir() + "/missing"}
	})
	g.Expect(send(f.server, http.MethodDelete, resetBob, "anything").Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(send(f.server, http.MethodDelete, resetBob, "r").Code).To(Equal(http.StatusForbidden))
	g.Expect(send(f.server, http.MethodGet, "/status", "r").Code).To(Equal(http.StatusOK), "reads need only the read token loaded")
	g.Expect(send(f.server, http.MethodGet, "/status", "wrong").Code).To(Equal(http.StatusUnauthorized))
}

func TestParsePeersTakesExactAddressesOnly(t *testing.T) {
	g := NewWithT(t)
	got, err := ParsePeers([]string{"127.0.0.1", " ::1", "::ffff:10.0.0.1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback(), netip.MustParseAddr("10.0.0.1")}))
	for _, bad := range []string{"127.0.0.0/8", "127.0.0.1:9901", "localhost", ""} {
		_, err := ParsePeers([]string{bad})
		g.Expect(err).To(HaveOccurred(), bad)
	}
}
