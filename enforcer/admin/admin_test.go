package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/adaptive"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/metrics"
	"github.com/sluice-dev/sluice/enforcer/proxy"
	"github.com/sluice-dev/sluice/enforcer/reload"
	"github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

var redisURL string

func TestMain(m *testing.M) {
	os.Exit(redistest.RunWithServer(m, func(s *redistest.Server) { redisURL = s.URL() }))
}

// twoPolicies: "api" limits every tenant (X-Tenant, else anonymous) to 5
// per hour, with a premium tier and an override for acme; "guard" fails
// closed and shadows /admin in DryRun.
func twoPolicies(t *testing.T) *config.Config {
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"schema": %q, "namespace": %q, "policies": [
{"name": "api", "uid": "u-api", "generation": 3, "selector": {}, "replicas": 1, "upstreamPort": 8080,
 "mode": "Enforce", "failureMode": "Open", "timeout": "1s", "responseHeaders": "Both", "salt": "s1",
 "tiers": {"source": {"header": {"name": "X-Plan"}}, "default": "free"},
 "rules": [{"name": "all", "match": {}, "algorithm": "FixedWindow", "cost": 1,
   "identity": {"sources": [{"header": {"name": "X-Tenant"}}]},
   "limits": [{"requests": 5, "period": "1h"}],
   "tierLimits": {"free": [{"requests": 5, "period": "1h"}], "premium": [{"requests": 50, "period": "1h"}]},
   "overrides": [{"tenant": "acme", "limits": [{"requests": 7, "period": "1h"}]}]}]},
{"name": "guard", "uid": "u-guard", "generation": 1, "selector": {}, "replicas": 1, "upstreamPort": 8080,
 "mode": "DryRun", "failureMode": "Closed", "timeout": "1s", "responseHeaders": "None", "salt": "s2",
 "rules": [{"name": "admin", "match": {"paths": [{"prefix": "/admin"}]}, "algorithm": "TokenBucket", "cost": 1,
   "identity": {"sources": [{"shared": {}}]}, "limits": [{"requests": 1, "period": "1h"}]}]}]}`,
		config.Schema, ns)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// unloaded is a proxy before its first configuration.
type unloaded struct{}

func (unloaded) Snapshot() *engine.Snapshot { return nil }

type fixedState reload.State

func (s fixedState) State() reload.State { return reload.State(s) }

type fixture struct {
	proxy, admin, debug string
	metrics             *metrics.Metrics
	handler             *proxy.Handler
	server              *Server
}

// start serves cfg through a proxy, with the admin and debug handlers on
// loopback listeners; startWith gives the admin listener a read token
// source, startWithAccess sets its access options as it likes.
func start(t *testing.T, cfg *config.Config, redisURL string) *fixture {
	return startWith(t, cfg, redisURL, nil)
}

func startWith(t *testing.T, cfg *config.Config, redisURL string, token TokenSource) *fixture {
	return startWithAccess(t, cfg, redisURL, func(o *Options) { o.StatusToken = token })
}

func startWithAccess(t *testing.T, cfg *config.Config, redisURL string, access func(*Options)) *fixture {
	t.Helper()
	app := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(app.Close)
	target, _ := url.Parse(app.URL)
	m := metrics.NewMetrics("test")
	h := proxy.New(proxy.Options{Upstream: target, Recorder: m})
	backends := engine.NewBackends(redisURL, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
	t.Cleanup(backends.Close)
	m.WatchBackends(backends.All)
	snap, err := engine.NewSnapshot(cfg, backends)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Swap(snap); err != nil {
		t.Fatal(err)
	}
	m.Reloaded(cfg.Hash(), len(cfg.Policies))
	px := httptest.NewServer(h)
	t.Cleanup(px.Close)
	opts := Options{
		Pod: status.Pod{Name: "api-0", Namespace: cfg.Namespace}, Version: "test", StartedAt: time.Unix(1_800_000_000, 0).UTC(),
		Upstream: target.String(), Snapshots: h, Adaptive: adaptive.New(h, nil), Waiting: h, Reloads: fixedState{Hash: cfg.Hash(), Config: cfg, LoadedAt: time.Unix(1_800_000_001, 0).UTC()}, Metrics: m,
	}
	access(&opts)
	srv := New(opts)
	adm := httptest.NewServer(srv)
	t.Cleanup(adm.Close)
	dbg := httptest.NewServer(srv.Debug())
	t.Cleanup(dbg.Close)
	return &fixture{proxy: px.URL, admin: adm.URL, debug: dbg.URL, metrics: m, handler: h, server: srv}
}

func fetch(g Gomega, url string, headers ...string) (int, string) {
	req, _ := http.NewRequest("GET", url, nil)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestStatusAndMetrics(t *testing.T) {
	g := NewWithT(t)
	cfg := twoPolicies(t)
	f := start(t, cfg, redisURL)
	for range 6 {
		fetch(g, f.proxy+"/x", "X-Tenant: t1")
	}
	// Refused by api, so the guard's token is given back...
	code, _ := fetch(g, f.proxy+"/admin", "X-Tenant: t1")
	g.Expect(code).To(Equal(429))
	fetch(g, f.proxy+"/admin", "X-Tenant: t2", "X-Plan: premium")
	// ...and taken by t2, so the guard would refuse this one.
	fetch(g, f.proxy+"/admin", "X-Tenant: t2", "X-Plan: premium")

	code, body := fetch(g, f.admin+"/status")
	g.Expect(code).To(Equal(200))
	var st status.Document
	g.Expect(json.Unmarshal([]byte(body), &st)).To(Succeed())
	g.Expect(st.Ready).To(BeTrue())
	g.Expect(st.Pod).To(Equal(status.Pod{Name: "api-0", Namespace: cfg.Namespace}))
	g.Expect(st.Config.Hash).To(Equal(cfg.Hash()))
	g.Expect(st.Config.LastReloadError).To(BeEmpty())
	g.Expect(st.Config.State).To(Equal(status.StateEnforcing))
	g.Expect(st.Config.FileMissing).To(BeFalse())
	g.Expect(st.Upstream).To(HavePrefix("http://127.0.0.1:"))
	g.Expect(st.Policies).To(Equal([]status.Policy{
		{Name: "api", UID: "u-api", Generation: 3, Mode: "Enforce", FailureMode: "Open", Redis: "default"},
		{Name: "guard", UID: "u-guard", Generation: 1, Mode: "DryRun", FailureMode: "Closed", Redis: "default"},
	}))
	g.Expect(st.Redis).To(HaveLen(1))
	g.Expect(st.Redis[0].Reachable).To(BeTrue())
	g.Expect(st.Redis[0].Policies).To(Equal([]string{"api", "guard"}))
	g.Expect(st.Decisions).To(Equal(map[string]status.DecisionCounts{
		"api":   {Allowed: 7, Denied: 2},
		"guard": {Allowed: 2, WouldDeny: 1},
	}))

	_, metrics := fetch(g, f.admin+"/metrics")
	for _, line := range []string{
		`sluice_enforcer_decisions_total{decision="allowed",policy="api",rule="all",tier="free"} 5`,
		`sluice_enforcer_decisions_total{decision="denied",policy="api",rule="all",tier="free"} 2`,
		`sluice_enforcer_decisions_total{decision="allowed",policy="api",rule="all",tier="premium"} 2`,
		`sluice_enforcer_decisions_total{decision="would_deny",policy="guard",rule="admin",tier=""} 1`,
		`sluice_enforcer_config_info{hash="` + cfg.Hash() + `"} 1`,
		`sluice_enforcer_config_last_reload_successful 1`,
		`sluice_enforcer_config_policies 2`,
		`sluice_enforcer_config_file_missing 0`,
		`sluice_enforcer_redis_round_trip_seconds_count{redis="default"} 9`,
		// Redis answered every request: the local fallback holds nothing.
		`sluice_enforcer_local_fallback_entries{redis="default"} 0`,
	} {
		g.Expect(metrics).To(ContainSubstring(line))
	}
	g.Expect(metrics).NotTo(ContainSubstring("t1"), "no tenant in labels")
}

// TestStatusStates: /status says whether the enforcer waits for its
// configuration, passes traffic through (no policy selects the pod) or
// enforces, and when its configuration file is gone.
func TestStatusStates(t *testing.T) {
	cfg := twoPolicies(t)
	empty := &config.Config{Schema: config.Schema, Namespace: cfg.Namespace, Policies: []config.Policy{}}
	for _, tc := range []struct {
		name  string
		state reload.State
		want  string
	}{
		{"nothing loaded yet", reload.State{}, status.StateWaiting},
		{"no policy selects the pod", reload.State{Config: empty}, status.StatePassThrough},
		{"policies", reload.State{Config: cfg}, status.StateEnforcing},
		{"file removed", reload.State{Config: cfg, FileMissing: true}, status.StateEnforcing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := New(Options{Snapshots: unloaded{}, Reloads: fixedState(tc.state), Metrics: metrics.NewMetrics("test")})
			st := srv.Status()
			g.Expect(st.Config.State).To(Equal(tc.want))
			g.Expect(st.Config.FileMissing).To(Equal(tc.state.FileMissing))
		})
	}
}

func TestDebugTenantDoesNotConsume(t *testing.T) {
	g := NewWithT(t)
	f := start(t, twoPolicies(t), redisURL)
	fetch(g, f.proxy+"/x", "X-Tenant: acme")
	fetch(g, f.proxy+"/x", "X-Tenant: acme")
	fetch(g, f.proxy+"/x", "X-Tenant: bob", "X-Plan: premium")
	for range 2 {
		code, body := fetch(g, f.debug+"/debug/tenant?policy=api&rule=all&tenant=acme")
		g.Expect(code).To(Equal(200), body)
		var u debugapi.TenantUsage
		g.Expect(json.Unmarshal([]byte(body), &u)).To(Succeed())
		g.Expect(u.Override).To(BeTrue())
		g.Expect(u.Tier).To(Equal("free"))
		g.Expect(u.Limit).To(Equal(int64(7)))
		g.Expect(u.Remaining).To(Equal(int64(5)))
		g.Expect(u.Allowed).To(BeTrue())
	}
	_, body := fetch(g, f.debug+"/debug/tenant?policy=api&rule=all&tenant=bob&tier=premium")
	g.Expect(body).To(ContainSubstring(`"remaining": 49`))
	_, body = fetch(g, f.debug+"/debug/tenant?policy=guard&rule=admin")
	g.Expect(body).To(ContainSubstring(`"remaining": 1`))

	code, body := fetch(g, f.debug+"/debug/tenant?policy=nope&rule=all&tenant=acme")
	g.Expect(code).To(Equal(404))
	g.Expect(body).To(ContainSubstring(`policy \"nope\" is not applied`))
	code, _ = fetch(g, f.debug+"/debug/tenant?policy=api&rule=nope")
	g.Expect(code).To(Equal(404))
}

func TestReadiness(t *testing.T) {
	g := NewWithT(t)
	srv := redistest.Start(t)
	f := start(t, twoPolicies(t), srv.URL())
	code, _ := fetch(g, f.admin+"/healthz")
	g.Expect(code).To(Equal(200))
	code, _ = fetch(g, f.admin+"/readyz")
	g.Expect(code).To(Equal(200))

	srv.Stop()
	fetch(g, f.proxy+"/x") // a decision notices
	code, body := fetch(g, f.admin+"/readyz")
	g.Expect(code).To(Equal(503))
	g.Expect(body).To(ContainSubstring("a Redis that a fail-closed policy needs is unreachable"))
	g.Expect(body).NotTo(ContainSubstring("guard"), "/readyz names no policy")
	g.Expect(body).NotTo(ContainSubstring("default"), "/readyz names no Redis")
	_, body = fetch(g, f.admin+"/status")
	g.Expect(body).To(ContainSubstring(`"reachable": false`))
	g.Expect(body).To(ContainSubstring(`"failureMode": 1`))

	ready, _ := readiness(nil)
	g.Expect(ready).To(BeFalse())
}
