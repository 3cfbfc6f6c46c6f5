package reload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// configJSON is a compiled config with one policy whose only rule admits
// requests per minute, selecting pods labelled app=api.
func configJSON(policy string, requests int) string {
	return fmt.Sprintf(`{"schema": "sluice.dev/enforcer-config/v1", "namespace": "shop", "policies": [{
  "name": %q, "uid": "u-1", "generation": %d, "selector": {"matchLabels": {"app": "api"}},
  "replicas": 1, "upstreamPort": 8080, "mode": "Enforce", "failureMode": "Open", "timeout": "50ms",
  "responseHeaders": "Both", "salt": "s",
  "rules": [{"name": "all", "match": {}, "algorithm": "FixedWindow", "cost": 1,
    "identity": {"sources": [{"shared": {}}]}, "limits": [{"requests": %d, "period": "1m"}]}]}]}`,
		policy, requests, requests)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// recorder collects applied configurations and observer calls.
type recorder struct {
	mu       sync.Mutex
	applied  []*Loaded
	failures int
	missing  []bool // FileMissing calls, in order
	policies int    // policies of the last configuration put into service
	fail     error
}

func (r *recorder) apply(l *Loaded) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.applied = append(r.applied, l)
	return nil
}

func (r *recorder) Reloaded(_ string, policies int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.policies = policies
}

func (r *recorder) FileMissing(missing bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.missing = append(r.missing, missing)
}
func (r *recorder) ReloadFailed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures++
}

func (r *recorder) limit() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.applied) == 0 {
		return 0
	}
	l := r.applied[len(r.applied)-1]
	return l.Config.Policies[0].Rules[0].Limits[0].Requests
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestReloaderKeepsLastGoodConfig(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	writeFile(t, path, configJSON("api", 10))
	rec := &recorder{}
	r := NewReloader(&Source{ConfigPath: path}, rec.apply, rec, quietLog())
	g.Expect(r.Start()).To(Succeed())
	first := r.State()
	g.Expect(first.Hash).NotTo(BeEmpty())
	g.Expect(rec.limit()).To(Equal(int64(10)))

	writeFile(t, path, `{"schema": "sluice.dev/enforcer-config/v1", "namespace": "shop", "policies": [{"name": "api"}]}`)
	g.Expect(r.Reload()).To(MatchError(ContainSubstring("policies[0](api).mode")))
	st := r.State()
	g.Expect(st.Hash).To(Equal(first.Hash))
	g.Expect(st.Errors).To(Equal(int64(1)))
	g.Expect(st.LastError).To(ContainSubstring("config.json"))
	g.Expect(rec.failures).To(Equal(1))
	g.Expect(rec.limit()).To(Equal(int64(10)))

	rec.fail = errors.New("redis env var missing")
	writeFile(t, path, configJSON("api", 20))
	g.Expect(r.Reload()).To(MatchError(ContainSubstring("apply config: redis env var missing")))
	g.Expect(r.State().Hash).To(Equal(first.Hash))

	rec.fail = nil
	g.Expect(r.Reload()).To(Succeed())
	st = r.State()
	g.Expect(st.Hash).NotTo(Equal(first.Hash))
	g.Expect(st.LastError).To(BeEmpty())
	g.Expect(st.Reloads).To(Equal(int64(1)))
	g.Expect(rec.limit()).To(Equal(int64(20)))

	// An unchanged file applies nothing.
	g.Expect(r.Reload()).To(Succeed())
	g.Expect(rec.applied).To(HaveLen(2))
}

// TestReloaderFileRemoved is a ConfigMap deleted by hand: the last good
// configuration stays in service, the state says the file is missing, and
// the failure is counted once however often the directory is looked at.
func TestReloaderFileRemoved(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, path, configJSON("api", 10))
	rec := &recorder{}
	r := NewReloader(&Source{ConfigPath: path}, rec.apply, rec, quietLog())
	g.Expect(r.Start()).To(Succeed())
	g.Expect(os.Remove(path)).To(Succeed())
	for range 3 {
		g.Expect(r.Reload()).To(MatchError(ContainSubstring("no such file")))
	}
	st := r.State()
	g.Expect(st.FileMissing).To(BeTrue())
	g.Expect(st.Enforcing()).To(BeTrue())
	g.Expect(st.Errors).To(Equal(int64(1)))
	g.Expect(st.LastError).To(ContainSubstring("the last good configuration stays in service"))
	g.Expect(rec.limit()).To(Equal(int64(10)))
	g.Expect(rec.failures).To(Equal(1))

	// The file back as it was: nothing to apply, and nothing missing.
	writeFile(t, path, configJSON("api", 10))
	g.Expect(r.Reload()).To(Succeed())
	st = r.State()
	g.Expect(st.FileMissing).To(BeFalse())
	g.Expect(st.LastError).To(BeEmpty())
	g.Expect(rec.missing).To(Equal([]bool{true, false}))
	g.Expect(rec.applied).To(HaveLen(1))
}

// TestReloaderPassesThroughWithoutPolicies: the namespace's last policy
// deleted, the manager publishes a configuration without policies, and the
// enforcer stops enforcing.
func TestReloaderPassesThroughWithoutPolicies(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, path, configJSON("api", 10))
	rec := &recorder{}
	r := NewReloader(&Source{ConfigPath: path}, rec.apply, rec, quietLog())
	g.Expect(r.Start()).To(Succeed())
	g.Expect(r.State().Enforcing()).To(BeTrue())
	g.Expect(rec.policies).To(Equal(1))

	writeFile(t, path, `{"schema": "sluice.dev/enforcer-config/v1", "namespace": "shop", "policies": []}`)
	g.Expect(r.Reload()).To(Succeed())
	g.Expect(r.State().Enforcing()).To(BeFalse())
	g.Expect(r.State().Config.Policies).To(BeEmpty())
	g.Expect(rec.policies).To(Equal(0))
}

func TestReloaderSelectsByLabels(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	path, labels := filepath.Join(dir, "config.json"), filepath.Join(dir, "labels")
	writeFile(t, path, configJSON("api", 10))
	writeFile(t, labels, "app=\"web\"\n")
	rec := &recorder{}
	r := NewReloader(&Source{ConfigPath: path, LabelsPath: labels}, rec.apply, nil, quietLog())
	g.Expect(r.Start()).To(Succeed())
	g.Expect(r.State().Config.Policies).To(BeEmpty())

	// Relabelling the pod is a change even though the config is the same.
	writeFile(t, labels, "app=\"api\"\n")
	g.Expect(r.Reload()).To(Succeed())
	g.Expect(r.State().Config.Policies).To(HaveLen(1))
}

func TestStartFailsOnBadConfig(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, path, `{"schema": "sluice.dev/enforcer-config/v9"}`)
	r := NewReloader(&Source{ConfigPath: path}, (&recorder{}).apply, nil, quietLog())
	g.Expect(r.Start()).To(MatchError(ContainSubstring(`schema "sluice.dev/enforcer-config/v9" is not supported`)))
	g.Expect(NewReloader(&Source{}, nil, nil, quietLog()).Start()).To(MatchError(ContainSubstring("a Source needs a ConfigPath or a Load function")))
}

// TestWatchReloads changes the file in the three ways files change in
// practice and expects each change in service within two seconds.
func TestWatchReloads(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	// A ConfigMap volume: config.json -> ..data/config.json, ..data -> ..v1.
	g.Expect(os.Mkdir(filepath.Join(dir, "..v1"), 0o755)).To(Succeed())
	writeFile(t, filepath.Join(dir, "..v1", "config.json"), configJSON("api", 1))
	g.Expect(os.Symlink("..v1", filepath.Join(dir, "..data"))).To(Succeed())
	g.Expect(os.Symlink(filepath.Join("..data", "config.json"), filepath.Join(dir, "config.json"))).To(Succeed())

	editable := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, editable, configJSON("api", 1))

	for _, tc := range []struct {
		name   string
		path   string
		change func(requests int)
	}{
		{"configmap symlink swap", filepath.Join(dir, "config.json"), func(n int) {
			v := fmt.Sprintf("..v%d", n)
			g.Expect(os.Mkdir(filepath.Join(dir, v), 0o755)).To(Succeed())
			writeFile(t, filepath.Join(dir, v, "config.json"), configJSON("api", n))
			tmp := filepath.Join(dir, "..data_tmp")
			g.Expect(os.Symlink(v, tmp)).To(Succeed())
			g.Expect(os.Rename(tmp, filepath.Join(dir, "..data"))).To(Succeed())
		}},
		{"rewrite in place", editable, func(n int) { writeFile(t, editable, configJSON("api", n)) }},
		{"rename over", editable, func(n int) {
			tmp := editable + ".swp"
			writeFile(t, tmp, configJSON("api", n))
			g.Expect(os.Rename(tmp, editable)).To(Succeed())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := &recorder{}
			r := NewReloader(&Source{ConfigPath: tc.path}, rec.apply, nil, quietLog())
			g.Expect(r.Start()).To(Succeed())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g.Expect(r.Watch(ctx, 50*time.Millisecond)).To(Succeed())
			start := rec.limit()
			for n := start + 1; n <= start+2; n++ {
				tc.change(int(n))
				g.Eventually(rec.limit, 2*time.Second, 20*time.Millisecond).Should(Equal(n))
			}
		})
	}
}

// A pod can start before its namespace's ConfigMap exists: the enforcer
// waits for the file instead of exiting, and loads it when it appears.
func TestStartWaitsForAConfigFileThatIsNotThereYet(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "config.json")
	rec := &recorder{}
	r := NewReloader(&Source{ConfigPath: path}, rec.apply, rec, quietLog())
	g.Expect(r.Start()).To(Succeed())
	g.Expect(r.State().LastError).To(ContainSubstring("waiting for the configuration"))
	g.Expect(rec.applied).To(BeEmpty(), "nothing is in service yet")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.Expect(r.Watch(ctx, 50*time.Millisecond)).To(Succeed())
	writeFile(t, path, configJSON("api", 7))
	g.Eventually(rec.limit, 2*time.Second, 20*time.Millisecond).Should(Equal(int64(7)))
	g.Expect(r.State().LastError).To(BeEmpty())

	// A file that exists but is wrong is still an error at start.
	other := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, other, "{")
	g.Expect(NewReloader(&Source{ConfigPath: other}, rec.apply, nil, quietLog()).Start()).NotTo(Succeed())
}

// TestWatchCatchesUpWithChangesBeforeIt: a file changed after Start but
// before the watch began (no event will ever report it) is loaded when
// the watch starts, not at the next change.
func TestWatchCatchesUpWithChangesBeforeIt(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, path, configJSON("api", 10))
	rec := &recorder{}
	r := NewReloader(&Source{ConfigPath: path}, rec.apply, rec, quietLog())
	g.Expect(r.Start()).To(Succeed())
	writeFile(t, path, configJSON("api", 20))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.Expect(r.Watch(ctx, 50*time.Millisecond)).To(Succeed())
	g.Eventually(rec.limit, 2*time.Second, 20*time.Millisecond).Should(Equal(int64(20)))
	g.Expect(r.State().Reloads).To(Equal(int64(1)))
	g.Expect(rec.failures).To(BeZero())
}
