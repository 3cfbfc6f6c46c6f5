package adaptive

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rules"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

var redisURL string

func TestMain(m *testing.M) {
	os.Exit(redistest.RunWithServer(m, func(s *redistest.Server) { redisURL = s.URL() }))
}

// inService is a configuration in service, as the proxy's handler gives it.
type inService struct{ snap *engine.Snapshot }

func (s inService) Snapshot() *engine.Snapshot { return s.snap }

// adaptiveConfig is one policy of two rules, b and a, both adaptive, in
// their own namespace.
func adaptiveConfig(t *testing.T) *config.Config {
	t.Helper()
	rule := func(name string) string {
		return fmt.Sprintf(`{"name": %q, "match": {}, "algorithm": "TokenBucket", "cost": 1,
  "identity": {"sources": [{"shared": {}}]}, "limits": [{"requests": 100, "period": "1m"}],
  "adaptive": {"latency": "250ms", "errorRate": 500, "minimum": 2500, "interval": "1s"}}`, name)
	}
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	cfg, err := config.Parse(fmt.Appendf(nil, `{"schema": %q, "namespace": %q, "policies": [{"name": "api", "uid": "uid-api",
  "generation": 1, "selector": {}, "replicas": 1, "upstreamPort": 8080, "mode": "Enforce", "failureMode": "Open",
  "timeout": "1s", "responseHeaders": "Both", "salt": "salt", "rules": [%s, %s]}]}`, config.Schema, ns, rule("b"), rule("a")))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// controllerOf is a Controller of cfg's adaptive rules, deciding with the
// Redis at url, and the first rule of its policy.
func controllerOf(t *testing.T, cfg *config.Config, url string) (*Controller, *engine.Backend, *rules.Scaling) {
	t.Helper()
	backends := engine.NewBackends(url, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
	t.Cleanup(backends.Close)
	snap, err := engine.NewSnapshot(cfg, backends)
	if err != nil {
		t.Fatal(err)
	}
	p := snap.Policy("api")
	return New(inService{snap}, nil), snap.BackendOf(p), snap.Table.Scaling(p.Rules[0])
}

// TestStepsReportWhatRedisAnswered: each step sends the rule's measurements
// and reports the shared state; the reports come sorted by policy and rule.
func TestStepsReportWhatRedisAnswered(t *testing.T) {
	g := NewWithT(t)
	c, be, r := controllerOf(t, adaptiveConfig(t), redisURL)
	reports := c.Reports()
	g.Expect(reports).To(HaveLen(2))
	g.Expect([]string{reports[0].Rule, reports[1].Rule}).To(Equal([]string{"a", "b"}))
	g.Expect(reports[1].Updated.IsZero()).To(BeTrue(), "nothing asked yet")
	g.Expect(reports[1].State.Factor).To(Equal(config.Full))

	for range 10 {
		r.Meter().Observe(10*time.Millisecond, http.StatusOK)
	}
	c.step(context.Background(), be, r)
	rep := c.Reports()[1]
	g.Expect(rep.Err).NotTo(HaveOccurred())
	g.Expect(rep.Updated.IsZero()).To(BeFalse())
	g.Expect(rep.Configured).To(Equal(rep.Effective), "healthy: the limits as configured")
	g.Expect(r.Meter().Take().Total).To(BeZero(), "the measurements were sent")
}

// TestAnOutageKeepsTheFactor: a rule whose Redis cannot be reached keeps
// its factor and its measurements, for the next step.
func TestAnOutageKeepsTheFactor(t *testing.T) {
	g := NewWithT(t)
	c, be, r := controllerOf(t, adaptiveConfig(t), "redis://127.0.0.1:1")
	for range 7 {
		r.Meter().Observe(time.Second, http.StatusInternalServerError)
	}
	c.step(context.Background(), be, r)
	rep := c.Reports()[1]
	g.Expect(rep.Err).To(HaveOccurred())
	g.Expect(rep.State.Factor).To(Equal(config.Full))
	g.Expect(r.Meter().Take().Total).To(Equal(int64(7)), "the measurements are kept")
}
