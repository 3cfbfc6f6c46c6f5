package reload

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// revisionJSON is configJSON at a revision.
func revisionJSON(revision int64, requests int) string {
	return strings.Replace(configJSON("api", requests), `"namespace": "shop",`,
		fmt.Sprintf(`"namespace": "shop", "revision": %d,`, revision), 1)
}

// pushFixture is an enforcer's reloader reading dir/config.json and
// dir/labels, the pod labelled app=api.
func pushFixture(t *testing.T, fileRevision int64, requests int) (*Reloader, *recorder, string, string) {
	t.Helper()
	dir := t.TempDir()
	path, labels := filepath.Join(dir, "config.json"), filepath.Join(dir, "labels")
	writeFile(t, path, revisionJSON(fileRevision, requests))
	writeFile(t, labels, "app=\"api\"\n")
	rec := &recorder{}
	r := NewReloader(&Source{ConfigPath: path, LabelsPath: labels}, rec.apply, rec, quietLog())
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	return r, rec, path, labels
}

// TestPushedConfigurationIsOrdered: a push newer than the file is applied,
// and the file then catching up, or lagging with an older revision, never
// takes it back; an older push is answered Older and changes nothing.
func TestPushedConfigurationIsOrdered(t *testing.T) {
	g := NewWithT(t)
	r, rec, path, _ := pushFixture(t, 5, 10)

	g.Expect(r.Offer(Pushed{Document: []byte(revisionJSON(6, 20))})).To(Equal(Applied))
	g.Expect(rec.limit()).To(Equal(int64(20)))
	g.Expect(r.State().Revision).To(Equal(int64(6)))
	g.Expect(r.State().Pushes).To(Equal(int64(1)))

	// The kubelet has not refreshed the volume: the file still says 5.
	g.Expect(r.Reload()).To(Succeed())
	g.Expect(rec.limit()).To(Equal(int64(20)))

	// A late push of 5 (a deposed leader's) is older.
	g.Expect(r.Offer(Pushed{Document: []byte(revisionJSON(5, 10))})).To(Equal(Older))
	g.Expect(rec.limit()).To(Equal(int64(20)))

	// The same push again is unchanged.
	g.Expect(r.Offer(Pushed{Document: []byte(revisionJSON(6, 20))})).To(Equal(Unchanged))

	// The file catches up with 6: nothing to apply; then it brings 7 first.
	writeFile(t, path, revisionJSON(6, 20))
	g.Expect(r.Reload()).To(Succeed())
	writeFile(t, path, revisionJSON(7, 30))
	g.Expect(r.Reload()).To(Succeed())
	g.Expect(rec.limit()).To(Equal(int64(30)))
	g.Expect(r.Offer(Pushed{Document: []byte(revisionJSON(6, 20))})).To(Equal(Older))
	g.Expect(rec.limit()).To(Equal(int64(30)))
	g.Expect(rec.applied).To(HaveLen(3))
	g.Expect(r.State().LastError).To(BeEmpty())
}

// TestFileAndPushRace delivers revisions 1..40 by file and by push in
// parallel, each path in its own order: whatever interleaving, the
// configurations put into service only ever rise, and the newest ends in
// service.
func TestFileAndPushRace(t *testing.T) {
	g := NewWithT(t)
	r, rec, path, _ := pushFixture(t, 1, 1)
	const last = 40
	var wg sync.WaitGroup
	wg.Go(func() {
		for rev := int64(2); rev <= last; rev++ {
			_, _ = r.Offer(Pushed{Document: []byte(revisionJSON(rev, int(rev)))})
		}
	})
	wg.Go(func() {
		// The file path lags and goes backwards, as a slow kubelet's would.
		for rev := int64(last); rev >= 2; rev -= 3 {
			writeFile(t, path, revisionJSON(rev, int(rev)))
			_ = r.Reload()
		}
	})
	wg.Wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var previous int64
	for _, l := range rec.applied {
		g.Expect(l.Config.Revision).To(BeNumerically(">", previous), "an older configuration was applied over a newer one")
		previous = l.Config.Revision
	}
	g.Expect(previous).To(Equal(int64(last)))
}

// TestPushRefusesWhatCannotBeOrdered: a push without a revision, of
// another namespace, or that does not load is refused; the configuration
// in service stays.
func TestPushRefusesWhatCannotBeOrdered(t *testing.T) {
	cases := map[string]string{
		"no revision":     configJSON("api", 99),
		"other namespace": strings.Replace(revisionJSON(9, 99), `"shop"`, `"other"`, 1),
		"invalid":         `{"schema": "sluice.dev/enforcer-config/v1", "namespace": "shop", "revision": 9, "policies": [{"name": "api"}]}`,
		"negative":        revisionJSON(-1, 99),
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r, rec, _, _ := pushFixture(t, 5, 10)
			_, err := r.Offer(Pushed{Document: []byte(doc)})
			g.Expect(err).To(HaveOccurred())
			g.Expect(rec.limit()).To(Equal(int64(10)))
			g.Expect(r.State().Revision).To(Equal(int64(5)))
			g.Expect(r.State().LastError).To(ContainSubstring("pushed config"))
		})
	}
}

// TestPushedLabelsStandUntilTheFileChanges: a relabel pushed selects the
// pod's policies at once; a reload of the stale labels file does not take
// it back; the file then changing is the kubelet's newer view.
func TestPushedLabelsStandUntilTheFileChanges(t *testing.T) {
	g := NewWithT(t)
	r, _, _, labels := pushFixture(t, 5, 10)
	writeFile(t, labels, "app=\"web\"\n")
	g.Expect(r.Reload()).To(Succeed())
	g.Expect(r.State().Config.Policies).To(BeEmpty())

	g.Expect(r.Offer(Pushed{Document: []byte(revisionJSON(6, 10)), Labels: map[string]string{"app": "api"}})).To(Equal(Applied))
	g.Expect(r.State().Config.Policies).To(HaveLen(1))
	g.Expect(r.Reload()).To(Succeed()) // the file still says web
	g.Expect(r.State().Config.Policies).To(HaveLen(1))

	writeFile(t, labels, "app=\"web\"\ntier=\"x\"\n")
	g.Expect(r.Reload()).To(Succeed())
	g.Expect(r.State().Config.Policies).To(BeEmpty())
}

// TestPushRefusedForPolicyFiles: an enforcer reading RateLimitPolicy files
// takes no push, which would override them.
func TestPushRefusedForPolicyFiles(t *testing.T) {
	g := NewWithT(t)
	r := NewReloader(&Source{Load: func() (*config.Config, error) { return config.Parse([]byte(configJSON("api", 10))) }},
		(&recorder{}).apply, nil, quietLog())
	g.Expect(r.Start()).To(Succeed())
	_, err := r.Offer(Pushed{Document: []byte(revisionJSON(9, 99))})
	g.Expect(err).To(MatchError(ContainSubstring("--policy-file")))
}
