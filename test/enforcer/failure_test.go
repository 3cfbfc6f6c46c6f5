package enforcer

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

const failureModes = `---
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: open}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  failureMode: Open
  timeout: 50ms
  identity: {sources: [{shared: {}}]}
  rules: [{name: all, match: {paths: [{prefix: /open}]}, algorithm: TokenBucket, limits: [{requests: 100000, period: 1h}]}]
---
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: closed}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  failureMode: Closed
  timeout: 50ms
  identity: {sources: [{shared: {}}]}
  rules: [{name: all, match: {paths: [{prefix: /closed}]}, algorithm: TokenBucket, limits: [{requests: 100000, period: 1h}]}]
---
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: local}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  failureMode: LocalFallback
  timeout: 50ms
  identity: {sources: [{shared: {}}]}
  # leasing Off: with the denial cache, a tenant Redis refused for the hour
  # stays refused through the outage, and the fallback never decides
  rules: [{name: all, match: {paths: [{prefix: /local}]}, algorithm: FixedWindow, leasing: "Off", limits: [{requests: 20, period: 1h}]}]
`

// outcome counts what the clients of one path saw during an outage.
type outcome struct {
	statuses   map[int]int
	maxLatency time.Duration
	withLimits int // responses carrying X-RateLimit headers
}

// hammer sends requests to each path from several clients for d, counting
// the answers to requests sent after grace (latency counts them all).
func hammer(t *testing.T, base string, paths []string, d, grace time.Duration) map[string]*outcome {
	out := map[string]*outcome{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	countFrom := time.Now().Add(grace)
	deadline := time.Now().Add(d)
	for _, p := range paths {
		out[p] = &outcome{statuses: map[int]int{}}
		for range 2 {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					counted := time.Now().After(countFrom)
					r := get(t, base+p)
					mu.Lock()
					o := out[p]
					o.maxLatency = max(o.maxLatency, r.took)
					if counted {
						o.statuses[r.status]++
						if r.header.Get("X-RateLimit-Limit") != "" {
							o.withLimits++
						}
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return out
}

// leaseGrace is how long a lease held when Redis goes keeps serving (the
// enforcer's 100 ms), with room for a busy machine.
const leaseGrace = 300 * time.Millisecond

// TestRedisOutageUnderLoad freezes Redis (it accepts connections and never
// answers, the worst case) then kills it, while clients keep sending: each
// policy's failure mode decides, and no request waits much longer than the
// policy's 50ms timeout.
func TestRedisOutageUnderLoad(t *testing.T) {
	g := NewWithT(t)
	srv := redistest.Start(t)
	e := start(t, setup{policies: failureModes, redisURL: srv.URL()})
	paths := []string{"/open", "/closed", "/local"}
	before := hammer(t, e.url, paths, 300*time.Millisecond, 0)
	for _, p := range paths {
		g.Expect(before[p].statuses).To(HaveKey(200), p)
	}

	// 50ms budget; the rest is scheduling slack on a busy 2-core machine
	// under the race detector. Without the budget a frozen Redis would hold
	// requests for the client's 1s read timeout.
	const bound = 50*time.Millisecond + 550*time.Millisecond
	for _, fault := range []struct {
		name       string
		cause, fix func()
	}{
		{"frozen", srv.Freeze, srv.Thaw},
		{"killed", srv.Stop, func() { g.Expect(srv.Restart()).To(Succeed()) }},
	} {
		fault.cause()
		// A lease held when Redis went keeps admitting until it ends
		// (100 ms); the failure modes decide from then on.
		during := hammer(t, e.url, paths, 1500*time.Millisecond, leaseGrace)
		fault.fix()
		for _, p := range paths {
			t.Logf("%s %s: statuses %v, slowest %s", fault.name, p, during[p].statuses, during[p].maxLatency)
			g.Expect(during[p].maxLatency).To(BeNumerically("<", bound), "%s %s", fault.name, p)
		}
		g.Expect(during["/open"].statuses).To(HaveKey(200), fault.name)
		g.Expect(during["/open"].statuses).To(HaveLen(1), "fail open admits everything")
		g.Expect(during["/open"].withLimits).To(BeZero(), "no guessed headers while Redis is out")
		g.Expect(during["/closed"].statuses).To(HaveKey(503), fault.name)
		g.Expect(during["/closed"].statuses).NotTo(HaveKey(200), "fail closed admits nothing")
		g.Expect(during["/local"].statuses).To(HaveKey(429), "the local fallback limits: %v", during["/local"].statuses)

		// Redis back: decisions are Redis' again.
		g.Eventually(func() string { return get(t, e.url+"/open").header.Get("X-RateLimit-Limit") }, 5*time.Second, 50*time.Millisecond).
			Should(Equal("100000"), fault.name)
	}
	r := get(t, e.url+"/closed")
	g.Expect(r.status).To(Equal(200))
	metrics := get(t, e.admin+"/metrics").body
	for _, l := range []string{`sluice_enforcer_failure_mode_decisions_total{mode="Closed",policy="closed"}`,
		`sluice_enforcer_failure_mode_decisions_total{mode="LocalFallback",policy="local"}`,
		`sluice_enforcer_failure_mode_decisions_total{mode="Open",policy="open"}`} {
		g.Expect(metrics).To(ContainSubstring(l))
	}
}
