package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/rls/erlconfig"
	"github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/testing/freeport"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// policyConfig is the operator's compiled configuration of namespace
// team: one policy, of domain, limiting each customer to perHour calls.
func policyConfig(t *testing.T, name, domain string, generation int64, perHour int) []byte {
	t.Helper()
	f, err := erlconfig.Parse("policy", fmt.Appendf(nil, "domain: %s\ndescriptors: [{key: customer, rate_limit: {unit: hour, requests_per_unit: %d}}]", domain, perHour))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := erlconfig.Compile([]*erlconfig.File{f}, erlconfig.Options{Namespace: "team"})
	if err != nil {
		t.Fatal(err)
	}
	p := &cfg.Policies[0]
	p.Name, p.UID, p.Generation, p.Salt = name, "uid-"+name, generation, "salt-"+name
	p.FailureMode = config.FailClosed
	p.Timeout = config.Duration{Duration: time.Second} // a loaded machine does not hand calls to the failure mode
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// configMapVolume writes files as the kubelet writes a ConfigMap volume:
// into a new timestamped folder, then swaps the ..data link to it.
type configMapVolume struct {
	t   *testing.T
	dir string
	n   int
}

func (v *configMapVolume) write(name string, data []byte) {
	v.t.Helper()
	v.n++
	ts := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", v.n, v.n)
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o755); err != nil {
		v.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.dir, ts, name), data, 0o644); err != nil {
		v.t.Fatal(err)
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		v.t.Fatal(err)
	}
	link := filepath.Join(v.dir, name)
	if _, err := os.Lstat(link); err != nil {
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			v.t.Fatal(err)
		}
	}
}

// adminProgram is the built sluice-ratelimit, started with args and env.
type adminProgram struct {
	grpc, admin int
	logs        *syncBuffer
	cmd         *exec.Cmd
	exited      chan error
}

func startAdminProgram(t *testing.T, args, env []string) *adminProgram {
	t.Helper()
	bin := programBinary(t)
	ports, err := freeport.Loopback(2)
	if err != nil {
		t.Fatal(err)
	}
	p := &adminProgram{grpc: ports[0], admin: ports[1], logs: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"--listen", "127.0.0.1:" + strconv.Itoa(ports[0]),
		"--admin-listen", "127.0.0.1:" + strconv.Itoa(ports[1]), "--http-listen", "", "--redis-timeout", "1s"}, args...)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.logs
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("logs:\n%s", p.logs.String())
		}
	})
	return p
}

// get asks the admin address for path with token ("" for none).
func (p *adminProgram) get(path, token string) (int, []byte) {
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", p.admin, path), nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// status is the decoded /status, as the operator's status controller
// decodes it.
func (p *adminProgram) status(g Gomega, token string) status.Document {
	code, body := p.get(status.Path, token)
	g.Expect(code).To(Equal(http.StatusOK), "%s", body)
	var doc status.Document
	g.Expect(json.Unmarshal(body, &doc)).To(Succeed())
	return doc
}

func (p *adminProgram) client(t *testing.T) func(domain, key, value string) ratelimitv3.RateLimitResponse_Code {
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", p.grpc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	rl := ratelimitv3.NewRateLimitServiceClient(conn)
	return func(domain, key, value string) ratelimitv3.RateLimitResponse_Code {
		resp, err := rl.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: domain,
			Descriptors: []*ratelimitv3common.RateLimitDescriptor{{Entries: []*ratelimitv3common.RateLimitDescriptor_Entry{{Key: key, Value: value}}}}})
		if err != nil {
			return -1
		}
		return resp.OverallCode
	}
}

// The operator's policies beside an ERL folder: the policy file decides
// its domain, /status reports it as an enforcer's, a domain both define
// is refused while the last good configuration serves, and a good file
// after it is loaded.
func TestPolicyConfigIsServedAndReported(t *testing.T) {
	g := NewWithT(t)
	srv := redistest.Start(t)
	erlDir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(erlDir, "shop.yaml"), []byte("domain: shop\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 5}}]"), 0o644)).To(Succeed())
	vol := &configMapVolume{t: t, dir: t.TempDir()}
	first := policyConfig(t, "orders-limit", "orders", 3, 2)
	vol.write("config.json", first)
	tokenFile := filepath.Join(t.TempDir(), "token")
	g.Expect(os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)).To(Succeed())

	p := startAdminProgram(t, []string{"--config-dir", erlDir, "--policy-config", filepath.Join(vol.dir, "config.json"), "--status-token-file", tokenFile},
		[]string{"REDIS_URL=" + srv.Addr(), "POD_NAME=ratelimit-0", "POD_NAMESPACE=team"})
	call := p.client(t)
	g.Eventually(func() int { code, _ := p.get("/readyz", ""); return code }, 10*time.Second, 50*time.Millisecond).Should(Equal(http.StatusOK))

	// The policy file decides its domain; the ERL folder still serves.
	g.Expect(call("orders", "customer", "a")).To(Equal(ratelimitv3.RateLimitResponse_OK))
	g.Expect(call("orders", "customer", "a")).To(Equal(ratelimitv3.RateLimitResponse_OK))
	g.Expect(call("orders", "customer", "a")).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT))
	g.Expect(call("shop", "user", "a")).To(Equal(ratelimitv3.RateLimitResponse_OK))

	// /status takes the bearer token, from loopback too, as the enforcer.
	code, body := p.get(status.Path, "")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "%s", body)
	code, _ = p.get(status.Path, "wrong")
	g.Expect(code).To(Equal(http.StatusUnauthorized))

	// So does /debug/tenant, which reads the policy's buckets.
	code, _ = p.get("/debug/tenant?domain=orders&entry=customer=a", "")
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	code, body = p.get("/debug/tenant?domain=orders&entry=customer=a", "s3cret")
	g.Expect(code).To(Equal(http.StatusOK), "%s", body)
	g.Expect(body).To(ContainSubstring(`"policy": "orders-limit"`))
	g.Expect(body).To(ContainSubstring(`"allowed": false`))

	firstCfg, err := config.Parse(first)
	g.Expect(err).NotTo(HaveOccurred())
	doc := p.status(g, "s3cret")
	g.Expect(doc.Pod).To(Equal(status.Pod{Name: "ratelimit-0", Namespace: "team"}))
	g.Expect(doc.Ready).To(BeTrue())
	g.Expect(doc.Config.State).To(Equal(status.StateEnforcing))
	g.Expect(doc.Config.Hash).To(Equal(firstCfg.Hash()), "the hash the operator wrote, not the merge's")
	g.Expect(doc.Config.Namespace).To(Equal("team"))
	g.Expect(doc.Policies).To(ContainElement(status.Policy{Name: "orders-limit", UID: "uid-orders-limit", Generation: 3,
		Mode: string(config.ModeEnforce), FailureMode: string(config.FailClosed), Redis: "default"}))
	g.Expect(doc.Policies).To(ContainElement(HaveField("Name", "shop")))
	g.Expect(doc.Redis).To(HaveLen(1))
	g.Expect(doc.Redis[0].Name).To(Equal("default"))
	g.Expect(doc.Redis[0].Reachable).To(BeTrue())
	g.Expect(doc.Redis[0].Policies).To(ConsistOf("shop", "orders-limit"))
	g.Expect(doc.Decisions).To(HaveKeyWithValue("orders-limit", status.DecisionCounts{Allowed: 2, Denied: 1}))
	g.Expect(doc.Decisions).To(HaveKeyWithValue("shop", status.DecisionCounts{Allowed: 1}))

	// A policy of the ERL file's domain is refused, naming both; the last
	// good configuration keeps serving.
	vol.write("config.json", policyConfig(t, "shop-limit", "shop", 1, 1))
	g.Eventually(func(g Gomega) {
		doc := p.status(g, "s3cret")
		g.Expect(doc.Config.ReloadErrors).To(Equal(int64(1)))
		g.Expect(doc.Config.LastReloadError).To(ContainSubstring(`domain "shop" is defined both by envoyproxy/ratelimit file ` + filepath.Join(erlDir, "shop.yaml")))
		g.Expect(doc.Config.LastReloadError).To(ContainSubstring("policy team/shop-limit of --policy-config " + filepath.Join(vol.dir, "config.json")))
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	doc = p.status(g, "s3cret")
	g.Expect(doc.Config.Hash).To(Equal(firstCfg.Hash()))
	g.Expect(doc.Policies).To(ContainElement(HaveField("Generation", int64(3))))
	g.Expect(call("orders", "customer", "a")).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT))
	g.Expect(call("orders", "customer", "b")).To(Equal(ratelimitv3.RateLimitResponse_OK))
	g.Expect(call("shop", "user", "a")).To(Equal(ratelimitv3.RateLimitResponse_OK), "the ERL file's limit of 5, not the refused 1")
	g.Expect(call("shop", "user", "a")).To(Equal(ratelimitv3.RateLimitResponse_OK))
	g.Expect(p.logs.String()).To(ContainSubstring("config reload failed; keeping the last good config"))

	// A good file after it is loaded.
	third := policyConfig(t, "orders-limit", "orders", 4, 1)
	vol.write("config.json", third)
	thirdCfg, err := config.Parse(third)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		doc := p.status(g, "s3cret")
		g.Expect(doc.Config.Hash).To(Equal(thirdCfg.Hash()))
		g.Expect(doc.Config.LastReloadError).To(BeEmpty())
		g.Expect(doc.Policies).To(ContainElement(HaveField("Generation", int64(4))))
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Expect(call("orders", "customer", "c")).To(Equal(ratelimitv3.RateLimitResponse_OK))
	g.Expect(call("orders", "customer", "c")).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT))

	g.Expect(p.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Eventually(p.exited, 10*time.Second).Should(Receive(BeNil()))
}

// With the policy file alone, a service started before the operator wrote
// it waits, not ready, and serves once the file appears.
func TestPolicyConfigAloneWaitsForTheFile(t *testing.T) {
	g := NewWithT(t)
	srv := redistest.Start(t)
	vol := &configMapVolume{t: t, dir: t.TempDir()}
	p := startAdminProgram(t, []string{"--policy-config", filepath.Join(vol.dir, "config.json")}, []string{"REDIS_URL=" + srv.Addr()})
	g.Eventually(func() int { code, _ := p.get("/healthz", ""); return code }, 10*time.Second, 50*time.Millisecond).Should(Equal(http.StatusOK))
	code, body := p.get("/readyz", "")
	g.Expect(code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(string(body)).To(ContainSubstring("waiting for the policy configuration"))
	doc := p.status(g, "") // no token file: loopback peers are served
	g.Expect(doc.Ready).To(BeFalse())
	g.Expect(doc.Config.State).To(Equal(status.StateWaiting))

	vol.write("config.json", policyConfig(t, "orders-limit", "orders", 1, 1))
	g.Eventually(func() int { code, _ := p.get("/readyz", ""); return code }, 10*time.Second, 50*time.Millisecond).Should(Equal(http.StatusOK))
	call := p.client(t)
	g.Expect(call("orders", "customer", "a")).To(Equal(ratelimitv3.RateLimitResponse_OK))
	g.Expect(call("orders", "customer", "a")).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT))
	g.Expect(p.status(g, "").Config.State).To(Equal(status.StateEnforcing))
}

// Without a token file, /status and /debug/tenant are served to 127.0.0.1
// and ::1 only (not to a mesh sidecar's 127.0.0.6), or to the exact
// addresses --admin-trusted-peer names.
func TestStatusWithoutTokenIsForLoopbackOnly(t *testing.T) {
	g := NewWithT(t)
	srv := redistest.Start(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte("domain: shop\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 5}}]"), 0o644)).To(Succeed())
	cases := []struct {
		name  string
		flags []string
		env   map[string]string
		want  map[string]int
	}{
		{"default", nil, nil, map[string]int{"10.1.2.3:4567": http.StatusForbidden, "127.0.0.6:4567": http.StatusForbidden,
			"127.0.0.1:4567": http.StatusOK, "[::1]:4567": http.StatusOK}},
		{"trusted peer", []string{"--admin-trusted-peer", "127.0.0.1"}, nil, map[string]int{"127.0.0.6:4567": http.StatusForbidden,
			"[::1]:4567": http.StatusForbidden, "127.0.0.1:4567": http.StatusOK}},
		{"trusted peers from the environment", nil, map[string]string{"SLUICE_ADMIN_TRUSTED_PEER": "10.1.2.3,::1"}, map[string]int{
			"127.0.0.1:4567": http.StatusForbidden, "10.1.2.3:4567": http.StatusOK, "[::1]:4567": http.StatusOK}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			env := map[string]string{"REDIS_URL": srv.Addr()}
			for k, v := range tc.env {
				env[k] = v
			}
			o, _, err := parseFlags(append([]string{"--config-dir", dir, "--listen", "127.0.0.1:0", "--admin-listen", "localhost:0", "--http-listen", ""}, tc.flags...),
				func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			g.Expect(err).NotTo(HaveOccurred())
			s, err := newService(o, func(string) (string, bool) { return "", false }, slog.New(slog.DiscardHandler))
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { s.closeListeners(); s.close() }()
			mux := s.adminMux()
			for remote, want := range tc.want {
				for _, path := range []string{status.Path, "/debug/tenant?domain=shop&entry=user=a"} {
					req := httptest.NewRequest(http.MethodGet, path, nil)
					req.RemoteAddr = remote
					rec := httptest.NewRecorder()
					mux.ServeHTTP(rec, req)
					g.Expect(rec.Code).To(Equal(want), "%s from %s: %s", path, remote, rec.Body.String())
				}
			}
		})
	}
	_, _, err := parseFlags([]string{"--config-dir", dir, "--admin-trusted-peer", "127.0.0.0/8"}, func(string) (string, bool) { return "", false })
	g.Expect(err).To(MatchError(ContainSubstring("--admin-trusted-peer")))
}

// With --policy-config, the ERL folder is read only when named; the admin
// flags are read from the enforcer's and the downward API's variables.
func TestPolicyConfigFlags(t *testing.T) {
	g := NewWithT(t)
	env := map[string]string{"SLUICE_POLICY_CONFIG": "/etc/sluice/config.json", "SLUICE_STATUS_TOKEN_FILE": "/var/run/sluice/token",
		"POD_NAME": "rls-0", "POD_NAMESPACE": "team"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	o, _, err := parseFlags(nil, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.admin).To(Equal(adminOptions{policyConfig: "/etc/sluice/config.json", statusTokenFile: "/var/run/sluice/token", podName: "rls-0", podNS: "team"}))
	g.Expect(o.configDir).To(BeEmpty(), "no ERL folder unless named")

	env["RUNTIME_ROOT"] = "/data"
	o, _, err = parseFlags([]string{"--pod-name", "rls-1"}, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.configDir).To(Equal("/data/config"))
	g.Expect(o.admin.podName).To(Equal("rls-1"))

	o, _, err = parseFlags(nil, func(string) (string, bool) { return "", false })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.configDir).To(Equal(erlconfig.RuntimeDir(defaultRuntimeRoot, "", "")), "without --policy-config, envoyproxy/ratelimit's default")
	_, _, err = parseFlags([]string{"--config-dir", ""}, func(string) (string, bool) { return "", false })
	g.Expect(err).To(MatchError(ContainSubstring("one of --config-dir and --policy-config is required")))
}
