package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
)

func TestDebugAndTokenFlags(t *testing.T) {
	base := []string{"--upstream", "http://127.0.0.1:8080", "--config", "c.json"}
	cases := []struct {
		name        string
		args        []string
		env         map[string]string
		debug, file string
		writeFile   string
		peers       []netip.Addr
		wantErr     string
	}{
		{name: "defaults", debug: "127.0.0.1:9902"},
		{name: "from the environment", env: map[string]string{"SLUICE_DEBUG_LISTEN": "127.0.0.5:7000", "SLUICE_STATUS_TOKEN_FILE": "/etc/sluice/admin/token",
			"SLUICE_WRITE_TOKEN_FILE": "/etc/sluice/admin-write/token", "SLUICE_ADMIN_TRUSTED_PEER": "127.0.0.1, ::1"},
			debug: "127.0.0.5:7000", file: "/etc/sluice/admin/token", writeFile: "/etc/sluice/admin-write/token",
			peers: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}},
		{name: "trusted peers", args: []string{"--admin-trusted-peer", "127.0.0.1", "--admin-trusted-peer", "10.0.0.4"}, debug: "127.0.0.1:9902",
			peers: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.0.4")}},
		{name: "a trusted range", args: []string{"--admin-trusted-peer", "127.0.0.0/8"}, wantErr: "--admin-trusted-peer"},
		{name: "IPv6 loopback", args: []string{"--debug-listen", "[::1]:9902"}, debug: "[::1]:9902"},
		{name: "turned off", args: []string{"--debug-listen", ""}, debug: ""},
		{name: "every address", args: []string{"--debug-listen", ":9902"}, wantErr: "must be a loopback address"},
		{name: "a pod IP", args: []string{"--debug-listen", "10.0.0.4:9902"}, wantErr: "must be a loopback address"},
		{name: "the admin listener's", args: []string{"--admin-listen", "127.0.0.1:9901", "--debug-listen", "127.0.0.1:9901"}, wantErr: "is also --listen or --admin-listen"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o, _, err := parseFlags(append(append([]string{}, base...), tc.args...), env(tc.env), &bytes.Buffer{})
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(o.debugListen).To(Equal(tc.debug))
			g.Expect(o.statusTokenFile).To(Equal(tc.file))
			g.Expect(o.writeTokenFile).To(Equal(tc.writeFile))
			g.Expect(o.trustedPeers).To(Equal(tc.peers))
		})
	}
}

// TestListeners runs the enforcer with the token files and checks what
// each listener serves.
func TestListeners(t *testing.T) {
	g := NewWithT(t)
	withCompiler(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "policy.yaml")
	g.Expect(os.WriteFile(cfg, []byte(`apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: api}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  failureMode: Open
  rules: [{name: all, limits: [{requests: 5, period: 1m}]}]
`), 0o600)).To(Succeed())
	token, writeToken := filepath.Join(dir, "token"), filepath.Join(dir, "write-token")
	g.Expect(os.WriteFile(token, []byte("tok\n"), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(writeToken, []byte("wtok\n"), 0o600)).To(Succeed())
	admin, debug := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var out bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--upstream", "http://127.0.0.1:1", "--policy-file", cfg, "--listen", freeAddr(t),
			"--admin-listen", admin, "--debug-listen", debug, "--status-token-file", token,
			"--write-token-file", writeToken, "--redis-url", "redis://127.0.0.1:1"},
			env(nil), io.Discard, &out)
	}()
	t.Cleanup(func() { cancel(); <-done })
	do := func(method, url, auth string) (int, string) {
		req, _ := http.NewRequest(method, url, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	get := func(url, auth string) (int, string) { return do("GET", url, auth) }
	g.Eventually(func() int { c, _ := get("http://"+admin+"/healthz", ""); return c }).WithTimeout(10*time.Second).Should(Equal(200), out.String())
	code, _ := get("http://"+admin+"/status", "")
	g.Expect(code).To(Equal(401))
	code, body := get("http://"+admin+"/status", "Bearer tok")
	g.Expect(code).To(Equal(200))
	g.Expect(body).To(ContainSubstring(`"name": "api"`))
	code, _ = get("http://"+admin+"/debug/tenant?policy=api&rule=all", "")
	g.Expect(code).To(Equal(401), "on the admin listener behind the token")
	code, body = get("http://"+debug+"/debug/tenant?policy=api&rule=all", "")
	g.Expect(code).NotTo(Equal(404), body)
	g.Expect(body).To(ContainSubstring("api"))
	code, _ = get("http://"+admin+"/status", "Bearer wtok")
	g.Expect(code).To(Equal(200), "the write token reads too")
	reset := "http://" + admin + "/tenant?policy=api&rule=all&tenant=acme"
	code, body = do("DELETE", reset, "Bearer tok")
	g.Expect(code).To(Equal(403), "the read token resets nothing: %s", body)
	code, body = do("DELETE", reset, "Bearer wtok")
	g.Expect(code).To(Equal(502), "past the token, to a Redis that is not there: %s", body)
}

// freeAddr is a free loopback address.
func freeAddr(t *testing.T) string {
	addrs, err := freeport.LoopbackAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	return addrs[0]
}

// TestAHeldPortNamesItsFlag starts the enforcer on ports another program
// holds: it exits, naming the flag and the variable that move each.
func TestAHeldPortNamesItsFlag(t *testing.T) {
	g := NewWithT(t)
	withCompiler(t)
	cfg := filepath.Join(t.TempDir(), "policy.yaml")
	g.Expect(os.WriteFile(cfg, []byte(`apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: api}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  rules: [{name: all, limits: [{requests: 5, period: 1m}]}]
`), 0o600)).To(Succeed())
	held, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer held.Close()
	for _, tc := range []struct{ listen, admin, want string }{
		{held.Addr().String(), freeAddr(t), "the proxy listener cannot bind " + held.Addr().String() + "; if another program holds the port, move it with --listen (or SLUICE_LISTEN)"},
		{freeAddr(t), held.Addr().String(), "move it with --admin-listen (or SLUICE_ADMIN_LISTEN)"},
	} {
		var stderr bytes.Buffer
		status := run(context.Background(), []string{"--upstream", "http://127.0.0.1:1", "--policy-file", cfg,
			"--listen", tc.listen, "--admin-listen", tc.admin, "--debug-listen", "", "--redis-url", "redis://127.0.0.1:1"}, env(nil), io.Discard, &stderr)
		g.Expect(status).NotTo(BeZero())
		g.Expect(stderr.String()).To(ContainSubstring(tc.want))
	}
}
