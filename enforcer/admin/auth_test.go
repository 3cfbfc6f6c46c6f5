package admin

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// staticToken is a token source that always has the same token.
type staticToken string

func (s staticToken) Token() (string, error) { return string(s), nil }

// request sends method path to h as if from remote, with an optional
// Authorization header.
func request(h http.Handler, remote, path, authorization string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", path, nil)
	req.RemoteAddr = remote
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// usageMarkers are strings of the /status document that reveal what an
// enforcer applies: none may reach a caller without the credential.
var usageMarkers = []string{`"policies"`, `"decisions"`, `"redis"`, "api", "guard", "redis://"}

func TestStatusNeedsTheCredentialFromAnotherPod(t *testing.T) {
	const token = "s3cret-token"
	pod := "10.244.1.7:41234"
	cases := []struct {
		name          string
		token         TokenSource
		remote        string
		authorization string
		code          int
	}{
		{"no token configured, another pod", nil, pod, "", http.StatusForbidden},
		{"no token configured, another pod with a token", nil, pod, "Bearer " + token, http.StatusForbidden},
		{"no token configured, IPv6 peer", nil, "[fd00::7]:41234", "", http.StatusForbidden},
		{"no token configured, loopback", nil, "127.0.0.1:41234", "", http.StatusOK},
		{"no credential", staticToken(token), pod, "", http.StatusUnauthorized},
		{"wrong token", staticToken(token), pod, "Bearer not-the-token", http.StatusUnauthorized},
		{"token prefix", staticToken(token), pod, "Bearer " + token[:5], http.StatusUnauthorized},
		{"basic scheme", staticToken(token), pod, "Basic " + token, http.StatusUnauthorized},
		{"loopback needs it too", staticToken(token), "127.0.0.1:41234", "", http.StatusUnauthorized},
		{"no token loaded yet", &TokenFile{Path: filepath.Join(t.TempDir(), "missing")}, pod, "Bearer " + token, http.StatusServiceUnavailable},
		{"right token", staticToken(token), pod, "Bearer " + token, http.StatusOK},
		{"right token, scheme in lower case", staticToken(token), pod, "bearer " + token, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := startWith(t, twoPolicies(t), redisURL, tc.token)
			w := request(f.server, tc.remote, "/status", tc.authorization)
			g.Expect(w.Code).To(Equal(tc.code), w.Body.String())
			if tc.code == http.StatusOK {
				g.Expect(w.Body.String()).To(ContainSubstring(`"name": "api"`))
				return
			}
			for _, m := range usageMarkers {
				g.Expect(w.Body.String()).NotTo(ContainSubstring(m))
			}
			if tc.code == http.StatusUnauthorized {
				g.Expect(w.Header().Get("WWW-Authenticate")).To(HavePrefix("Bearer"))
			}
		})
	}
}

func TestProbesAndMetricsNeedNoCredential(t *testing.T) {
	g := NewWithT(t)
	f := startWith(t, twoPolicies(t), redisURL, staticToken("t"))
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		w := request(f.server, "10.244.1.7:41234", path, "")
		g.Expect(w.Code).To(Equal(http.StatusOK), path)
	}
	w := request(f.server, "10.244.1.7:41234", "/readyz", "")
	g.Expect(w.Body.String()).To(Equal("ok\n"))
}

func TestAdminListenerServesDebugTenantBehindTheTokenOnly(t *testing.T) {
	g := NewWithT(t)
	f := startWith(t, twoPolicies(t), redisURL, staticToken("t"))
	for _, remote := range []string{"127.0.0.1:41234", "10.244.1.7:41234"} {
		w := request(f.server, remote, "/debug/pprof/", "Bearer t")
		g.Expect(w.Code).To(Equal(http.StatusNotFound), "profiles are not on the admin listener (from %s)", remote)
		w = request(f.server, remote, "/debug/tenant?policy=api&rule=all&tenant=acme", "")
		g.Expect(w.Code).To(Equal(http.StatusUnauthorized), "/debug/tenant from %s without the token", remote)
		g.Expect(w.Body.String()).NotTo(ContainSubstring("remaining"))
		w = request(f.server, remote, "/debug/tenant?policy=api&rule=all&tenant=acme", "Bearer t")
		g.Expect(w.Code).To(Equal(http.StatusOK), "/debug/tenant from %s with the token: %s", remote, w.Body.String())
	}
	// The debug handler serves loopback peers only, whatever its listener.
	w := request(f.server.Debug(), "10.244.1.7:41234", "/debug/tenant?policy=api&rule=all&tenant=acme", "Bearer t")
	g.Expect(w.Code).To(Equal(http.StatusForbidden))
	g.Expect(w.Body.String()).NotTo(ContainSubstring("remaining"))
	w = request(f.server.Debug(), "127.0.0.1:41234", "/debug/tenant?policy=api&rule=all&tenant=acme", "")
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	g.Expect(w.Body.String()).To(ContainSubstring(`"remaining": 7`))
	// Neither status nor probes are on the debug listener.
	g.Expect(request(f.server.Debug(), "127.0.0.1:41234", "/status", "").Code).To(Equal(http.StatusNotFound))
}

// TestStatusOverTheNetwork serves the admin handler on an address of this
// machine other than loopback, as on a pod IP, and asks it over TCP.
func TestStatusOverTheNetwork(t *testing.T) {
	g := NewWithT(t)
	ip := nonLoopbackIP(t)
	tokenPath := filepath.Join(t.TempDir(), "token")
	g.Expect(os.WriteFile(tokenPath, []byte("first\n"), 0o600)).To(Succeed())
	now := time.Unix(1_800_000_000, 0)
	tokens := &TokenFile{Path: tokenPath, Now: func() time.Time { return now }}
	f := startWith(t, twoPolicies(t), redisURL, tokens)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewUnstartedServer(f.server)
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	base := srv.URL

	code, body := fetch(g, base+"/status")
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	g.Expect(body).NotTo(ContainSubstring("guard"))
	code, _ = fetch(g, base+"/status", "Authorization: Bearer second")
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	code, body = fetch(g, base+"/status", "Authorization: Bearer first")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`"name": "guard"`))
	code, _ = fetch(g, base+"/healthz")
	g.Expect(code).To(Equal(http.StatusOK))
	code, _ = fetch(g, base+"/readyz")
	g.Expect(code).To(Equal(http.StatusOK))
	code, _ = fetch(g, base+"/debug/tenant?policy=api&rule=all&tenant=acme")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "a tenant's usage needs the token on the admin listener")

	// A rotated Secret: the new token is in force once the cache expires.
	g.Expect(os.WriteFile(tokenPath, []byte("second"), 0o600)).To(Succeed())
	code, _ = fetch(g, base+"/status", "Authorization: Bearer first")
	g.Expect(code).To(Equal(http.StatusOK), "read at most once a second")
	now = now.Add(tokenFileTTL)
	code, _ = fetch(g, base+"/status", "Authorization: Bearer first")
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	code, _ = fetch(g, base+"/status", "Authorization: Bearer second")
	g.Expect(code).To(Equal(http.StatusOK))
}

// nonLoopbackIP is an IPv4 address of this machine other than loopback;
// the test is skipped on a machine without one.
func nonLoopbackIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !strings.HasPrefix(n.IP.String(), "169.254.") {
			return n.IP.String()
		}
	}
	t.Skip("this machine has no IPv4 address other than loopback")
	return ""
}
