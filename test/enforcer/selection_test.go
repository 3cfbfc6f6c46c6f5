package enforcer

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// TestLabelsSelectPolicies: only policies whose selector matches the pod's
// labels (downward API file) apply, and relabelling the pod is a reload.
func TestLabelsSelectPolicies(t *testing.T) {
	g := NewWithT(t)
	labels := filepath.Join(t.TempDir(), "labels")
	g.Expect(os.WriteFile(labels, []byte("app=\"web\"\npod-template-hash=\"5d4f8c7b9\"\n"), 0o644)).To(Succeed())
	e := start(t, setup{config: compiledConfig(namespace(t), 1, 1), args: []string{"--labels-file", labels}})
	for range 3 {
		r := get(t, e.url, "X-Tenant-ID: acme")
		g.Expect(r.status).To(Equal(200), "the policy selects app=api, not this pod")
		g.Expect(r.header.Get("X-RateLimit-Limit")).To(BeEmpty())
	}
	g.Expect(status(t, e).Policies).To(BeEmpty())

	g.Expect(os.WriteFile(labels, []byte("app=\"api\"\npod-template-hash=\"5d4f8c7b9\"\n"), 0o644)).To(Succeed())
	g.Eventually(func() string { return get(t, e.url, "X-Tenant-ID: acme").header.Get("X-RateLimit-Limit") }, 2*time.Second, 20*time.Millisecond).
		Should(Equal("1"))
	g.Expect(status(t, e).Policies).To(HaveLen(1))
}

// TestPolicyWithItsOwnRedis: a policy with spec.storage decides with the
// Redis its environment variable names; the others with --redis-url.
func TestPolicyWithItsOwnRedis(t *testing.T) {
	g := NewWithT(t)
	other := redistest.Start(t)
	policies := policy("shared-redis", `  identity: {sources: [{shared: {}}]}
  rules: [{name: all, match: {paths: [{prefix: /a}]}, limits: [{requests: 10, period: 1h}]}]`) + "---\n" +
		policy("team-b", `  storage: {secretRef: {name: team-b-redis}}
  identity: {sources: [{shared: {}}]}
  rules: [{name: all, match: {paths: [{prefix: /b}]}, limits: [{requests: 10, period: 1h}]}]`)
	e := start(t, setup{policies: policies, env: []string{"SLUICE_REDIS_URL_TEAM_B=" + other.URL()}})
	g.Expect(get(t, e.url+"/a").status).To(Equal(200))
	g.Expect(get(t, e.url+"/b").status).To(Equal(200))

	ctx := context.Background()
	pattern := "sl:{" + namespace(t) + "/*"
	g.Expect(shared.Client().Keys(ctx, pattern).Val()).To(ConsistOf(ContainSubstring("/shared-redis/all/")))
	g.Expect(other.Client().Keys(ctx, pattern).Val()).To(ConsistOf(ContainSubstring("/team-b/all/")))

	var st struct {
		Redis []struct {
			Name     string   `json:"name"`
			URL      string   `json:"url"`
			Policies []string `json:"policies"`
		} `json:"redis"`
	}
	g.Expect(json.Unmarshal([]byte(get(t, e.admin+"/status").body), &st)).To(Succeed())
	g.Expect(st.Redis).To(HaveLen(2))
	g.Expect(st.Redis[0].Name).To(Equal("default"))
	g.Expect(st.Redis[1].Name).To(Equal("SLUICE_REDIS_URL_TEAM_B"))
	g.Expect(st.Redis[1].URL).To(Equal(other.URL()))
	g.Expect(st.Redis[1].Policies).To(Equal([]string{"team-b"}))

	// Without the variable the enforcer does not start: its limits would
	// be counted in another Redis than its other replicas use.
	path := filepath.Join(t.TempDir(), "p.yaml")
	g.Expect(os.WriteFile(path, []byte(policies), 0o644)).To(Succeed())
	listen, admin := freeAddrs(t)
	out, err := runBinary("--upstream", "http://127.0.0.1:1", "--policy-file", path, "--listen", listen, "--admin-listen", admin)
	g.Expect(exitCode(err)).To(Equal(3))
	g.Expect(out).To(ContainSubstring("policy team-b: environment variable SLUICE_REDIS_URL_TEAM_B, which holds its Redis URL, is not set"))
}
