package proxy

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/transport"
)

// forwardPaths are the two ways an admitted request reaches the
// application: the forwarder, and the reverse proxy (upgrades, and every
// request when the application is not a plain http:// address or a
// Transport is given). The proxy's answers for both are tested through
// both; the transport's own tests hold them to the bytes.
var forwardPaths = []string{"forwarder", "reverse-proxy"}

// reverseProxyOnly has every request of a Handler made with opts go
// through the reverse proxy, on the transport New would give it.
func reverseProxyOnly(opts Options) Options {
	t := transport.NewHTTP1()
	t.ResponseHeaderTimeout = max(opts.ResponseHeaderTimeout, 0)
	t.DisableKeepAlives = true
	opts.Transport = t
	return opts
}

// allowAll is a config whose one rule admits every request of a test.
func allowAll(t *testing.T) string {
	return policyJSON("api", "Enforce", "Open", "XRateLimit", ruleJSON("all", "{}", "TokenBucket", "1000000/1m"))
}

// serveWith is a Handler made with opts, deciding with allowAll, in front
// of the application at appURL, with the reverse proxy taking every request
// when path says so.
func serveWith(t *testing.T, path string, opts Options, appURL string) *fixture {
	t.Helper()
	opts.Upstream, _ = url.Parse(appURL)
	rec := &recording{checks: map[string]int{}, policies: map[string]int{}}
	opts.Recorder = rec
	if path == "reverse-proxy" {
		opts = reverseProxyOnly(opts)
	}
	h := New(opts)
	t.Cleanup(h.CloseIdleConnections)
	backends := engine.NewBackends(redisURL, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
	t.Cleanup(backends.Close)
	snap, err := engine.NewSnapshot(configOf(t, allowAll(t)), backends)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Swap(snap); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{url: srv.URL, rec: rec, handler: h, backends: backends}
}

// TestApplicationUnreachable: 502 with a problem body.
func TestApplicationUnreachable(t *testing.T) {
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := ln.Addr().String()
	ln.Close()
	f := serveTo(t, configOf(t, allowAll(t)), redisURL, "http://"+addr)
	r := get(g, f.url+"/")
	g.Expect(r.status).To(Equal(http.StatusBadGateway))
	g.Expect(r.header.Get("Content-Type")).To(Equal("application/problem+json"))
	g.Expect(r.body).To(ContainSubstring(ProblemUpstreamUnavailable))
	g.Expect(f.rec.upstream).To(Equal(1))
}
