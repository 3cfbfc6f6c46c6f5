package enforcer

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// compiledConfig is an operator-written configuration: one policy admitting
// limit requests per hour per tenant.
func compiledConfig(ns string, generation, limit int) string {
	return fmt.Sprintf(`{"schema": "sluice.dev/enforcer-config/v1", "namespace": %q, "policies": [{
  "name": "api", "uid": "6f0c", "generation": %d, "selector": {"matchLabels": {"app": "api"}},
  "replicas": 1, "upstreamPort": 8080, "mode": "Enforce", "failureMode": "Open", "timeout": "1s",
  "responseHeaders": "XRateLimit", "salt": "6f0c",
  "rules": [{"name": "all", "match": {}, "algorithm": "FixedWindow", "cost": 1,
    "identity": {"sources": [{"header": {"name": "X-Tenant-ID"}}]}, "limits": [{"requests": %d, "period": "1h"}]}]}]}`,
		ns, generation, limit)
}

type statusDoc struct {
	Config struct {
		Hash            string `json:"hash"`
		Reloads         int64  `json:"reloads"`
		ReloadErrors    int64  `json:"reloadErrors"`
		LastReloadError string `json:"lastReloadError"`
	} `json:"config"`
	Policies []struct {
		Name       string `json:"name"`
		Generation int64  `json:"generation"`
	} `json:"policies"`
}

func status(t *testing.T, e *instance) statusDoc {
	var st statusDoc
	if err := json.Unmarshal([]byte(get(t, e.admin+"/status").body), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestReloadUnderTraffic changes the configuration while a client keeps
// sending requests: every request is answered, the change is in service
// within two seconds, and a broken file keeps the last good configuration.
func TestReloadUnderTraffic(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	e := start(t, setup{config: compiledConfig(ns, 1, 100000)})
	ctx, cancel := context.WithCancel(context.Background())
	var sent, failed atomic.Int64
	var lastLimit atomic.Value
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				r, err := tryDo(ctx, "GET", e.url, "X-Tenant-ID: looper")
				if ctx.Err() != nil {
					return
				}
				sent.Add(1)
				if err != nil || r.status != 200 {
					failed.Add(1)
					t.Errorf("request failed during reload: %v %d %s", err, r.status, r.body)
					continue
				}
				lastLimit.Store(r.header.Get("X-RateLimit-Limit"))
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	g.Eventually(lastLimit.Load).Should(Equal("100000"))

	g.Expect(os.WriteFile(e.configPath, []byte(compiledConfig(ns, 2, 200000)), 0o644)).To(Succeed())
	g.Eventually(lastLimit.Load, 2*time.Second, 10*time.Millisecond).Should(Equal("200000"))
	st := status(t, e)
	g.Expect(st.Policies[0].Generation).To(Equal(int64(2)))
	g.Expect(st.Config.Reloads).To(Equal(int64(1)))
	goodHash := st.Config.Hash

	g.Expect(os.WriteFile(e.configPath, []byte(`{"schema": "sluice.dev/enforcer-config/v1", "namespace": "x", "policies": [{"name": "api", "mode": "Enforcing"}]}`), 0o644)).To(Succeed())
	g.Eventually(func() string { return status(t, e).Config.LastReloadError }, 2*time.Second, 20*time.Millisecond).
		Should(ContainSubstring(`mode: "Enforcing" is not one of Enforce, DryRun`))
	st = status(t, e)
	g.Expect(st.Config.Hash).To(Equal(goodHash))
	g.Expect(st.Config.ReloadErrors).To(Equal(int64(1)))
	metrics := get(t, e.admin+"/metrics").body
	g.Expect(metrics).To(ContainSubstring("sluice_enforcer_config_reload_errors_total 1"))
	g.Expect(metrics).To(ContainSubstring("sluice_enforcer_config_last_reload_successful 0"))
	g.Expect(e.logs.String()).To(ContainSubstring("keeping the last good config"))
	g.Consistently(lastLimit.Load, 300*time.Millisecond, 10*time.Millisecond).Should(Equal("200000"), "the last good configuration stays in service")

	g.Expect(os.WriteFile(e.configPath, []byte(compiledConfig(ns, 3, 300000)), 0o644)).To(Succeed())
	g.Eventually(lastLimit.Load, 2*time.Second, 10*time.Millisecond).Should(Equal("300000"))
	g.Expect(status(t, e).Config.LastReloadError).To(BeEmpty())
	cancel()
	wg.Wait()
	g.Expect(failed.Load()).To(BeZero())
	g.Expect(sent.Load()).To(BeNumerically(">", 50))
}

// TestBadConfigAtStart: the enforcer refuses to start, saying why.
func TestBadConfigAtStart(t *testing.T) {
	g := NewWithT(t)
	path := t.TempDir() + "/config.json"
	g.Expect(os.WriteFile(path, []byte(`{"schema": "sluice.dev/enforcer-config/v1", "namespace": "x", "policies": [{"name": "api", "mode": "Enforcing"}]}`), 0o644)).To(Succeed())
	listen, admin := freeAddrs(t)
	out, err := runBinary("--upstream", "http://127.0.0.1:1", "--config", path, "--listen", listen, "--admin-listen", admin)
	g.Expect(exitCode(err)).To(Equal(3))
	g.Expect(out).To(ContainSubstring(`invalid configuration: load config ` + path + `: policies[0](api).mode: "Enforcing" is not one of Enforce, DryRun`))

	out, err = runBinary("--upstream", "http://127.0.0.1:1")
	g.Expect(exitCode(err)).To(Equal(2))
	g.Expect(out).To(ContainSubstring("one of --config or --policy-file is required"))
}

// TestPolicyFileReload edits a --policy-file (sluice-policy-compile compiles
// it, beside the enforcer): a good edit is in service, an edit the API
// server would refuse keeps the last good configuration and is reported as
// the compiler words it, and the next good edit is in service again.
func TestPolicyFileReload(t *testing.T) {
	g := NewWithT(t)
	spec := func(limit string) string {
		return "  identity: {sources: [{header: {name: X-Tenant-ID}}]}\n  rules: [{name: all, limits: [{requests: " + limit + ", period: 1h}]}]"
	}
	e := start(t, setup{policies: policy("api", spec("100"))})
	limit := func() string { return do(t, "GET", e.url, "X-Tenant-ID: reader").header.Get("X-RateLimit-Limit") }
	g.Expect(limit()).To(Equal("100"))

	g.Expect(os.WriteFile(e.configPath, []byte(policy("api", spec("200"))), 0o644)).To(Succeed())
	g.Eventually(limit).WithTimeout(10 * time.Second).Should(Equal("200"))
	goodHash := status(t, e).Config.Hash

	g.Expect(os.WriteFile(e.configPath, []byte(policy("api", spec("200")+"\n  overrides: [{tenant: acme, rule: all, limits: [{requests: 1, period: 1m}, {requests: 2, period: 60s}]}]")), 0o644)).To(Succeed())
	g.Eventually(func() string { return status(t, e).Config.LastReloadError }).WithTimeout(10 * time.Second).
		Should(ContainSubstring(`spec.overrides[0]: Invalid value: two limits of this override have the same period: keep one limit per period`))
	st := status(t, e)
	g.Expect(st.Config.LastReloadError).To(HavePrefix("load policies: " + e.configPath + ` document 1: RateLimitPolicy "api" is invalid:`))
	g.Expect(st.Config.Hash).To(Equal(goodHash))
	g.Expect(e.logs.String()).To(ContainSubstring("keeping the last good config"))
	g.Expect(limit()).To(Equal("200"), "the last good configuration stays in service")

	g.Expect(os.WriteFile(e.configPath, []byte(policy("api", spec("300"))), 0o644)).To(Succeed())
	g.Eventually(limit).WithTimeout(10 * time.Second).Should(Equal("300"))
	g.Expect(status(t, e).Config.LastReloadError).To(BeEmpty())
}
