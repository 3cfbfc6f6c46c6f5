package enforcer

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// receiptApp is an application that notes when each request reached it.
type receiptApp struct {
	mu    sync.Mutex
	times []time.Time
}

func newReceiptApp(t *testing.T) (*receiptApp, string) {
	a := &receiptApp{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		a.mu.Lock()
		a.times = append(a.times, now)
		a.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return a, srv.URL
}

func (a *receiptApp) received() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.SortedFunc(slices.Values(a.times), time.Time.Compare)
}

// load sends requests of one tenant from clients goroutines to each base
// URL until d passes, and returns how many it sent.
func load(t *testing.T, bases []string, clients int, d time.Duration, headers ...string) int64 {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sent int64
	stop := time.Now().Add(d)
	for _, base := range bases {
		for range clients {
			wg.Go(func() {
				var n int64
				for time.Now().Before(stop) {
					r := get(t, base+"/v1/items", headers...)
					if r.status != 200 && r.status != 429 {
						t.Errorf("status %d: %s", r.status, r.body)
						return
					}
					n++
				}
				mu.Lock()
				sent += n
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return sent
}

// metricValue is the sum of the samples of metric name on the enforcer's
// /metrics that carry every one of labels (`policy="hot"`), 0 when none.
func metricValue(t *testing.T, e *instance, name string, labels ...string) float64 {
	body := get(t, e.admin+"/metrics").body
	var sum float64
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`(\{[^}]*\})? (\S+)$`).FindAllStringSubmatch(body, -1) {
		if !containsAll(m[1], labels) {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestLeasesNeverExceedTheLimitAcrossEnforcers runs two enforcers with 32
// clients each on one hot tenant: whatever the leases, the application
// never receives more than each algorithm's limit allows, and most
// decisions are made without Redis.
func TestLeasesNeverExceedTheLimitAcrossEnforcers(t *testing.T) {
	for _, c := range []struct {
		algorithm, limit string
		// bound is the most the application may have received by the time
		// elapsed since the load started
		bound func(elapsed time.Duration) float64
		// calls is the most Redis calls per decision: a bucket refilling
		// every 2.5 ms has a new answer for nearly every request of this
		// load, a window spent for the hour has one answer until it ends,
		// and a limit never reached is leased
		calls float64
	}{
		{"TokenBucket", "{requests: 400, period: 1s, burst: 50}", func(e time.Duration) float64 { return 50 + 400*e.Seconds() }, 1.05},
		{"GCRA", "{requests: 400, period: 1s, burst: 50}", func(e time.Duration) float64 { return 50 + 400*e.Seconds() }, 1.05},
		// one window for the whole test: its count is the limit
		{"FixedWindow", "{requests: 900, period: 1h}", func(time.Duration) float64 { return 900 }, 0.1},
		{"TokenBucket", "{requests: 1000000, period: 1s}", func(time.Duration) float64 { return math.Inf(1) }, 0.1},
	} {
		t.Run(c.algorithm+"/"+c.limit, func(t *testing.T) {
			g := NewWithT(t)
			app, url := newReceiptApp(t)
			spec := fmt.Sprintf(`  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: items
      algorithm: %s
      limits: [%s]`, c.algorithm, c.limit)
			policies := policy("hot", spec)
			a := start(t, setup{policies: policies, upstream: url})
			b := start(t, setup{policies: policies, upstream: url})
			tenant := "X-Tenant-ID: " + namespace(t) + strconv.FormatInt(time.Now().UnixNano(), 36)
			begin := time.Now()
			sent := load(t, []string{a.url, b.url}, 32, 2*time.Second, tenant)

			received := app.received()
			g.Expect(len(received)).To(BeNumerically(">", 200))
			for i, at := range received {
				g.Expect(float64(i+1)).To(BeNumerically("<=", c.bound(at.Sub(begin))+1e-6),
					"%d requests reached the application %s after the start", i+1, at.Sub(begin))
			}
			var calls, decisions float64
			for _, e := range []*instance{a, b} {
				calls += metricValue(t, e, "sluice_enforcer_redis_calls_total", `policy="hot"`)
				decisions += metricValue(t, e, "sluice_enforcer_decisions_total", `policy="hot"`)
			}
			t.Logf("%d sent, %d received, %.0f decisions, %.0f Redis calls", sent, len(received), decisions, calls)
			g.Expect(decisions).To(BeNumerically("==", sent))
			g.Expect(calls/decisions).To(BeNumerically("<", c.calls), "cached refusals and leases spare Redis")
		})
	}
}

// TestLeasesGoBackAtShutdownAndReload takes leases on a hot tenant, then
// stops the enforcer, or reloads its configuration: the leases' unused
// units are back in Redis, which a fresh decision's Remaining shows.
func TestLeasesGoBackAtShutdownAndReload(t *testing.T) {
	const capacity = 1_000_000
	spec := fmt.Sprintf(`  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: items
      algorithm: TokenBucket
      limits: [{requests: 1000, period: 24h, burst: %d}]`, capacity)
	for _, how := range []string{"shutdown", "reload"} {
		t.Run(how, func(t *testing.T) {
			g := NewWithT(t)
			app, url := newReceiptApp(t)
			e := start(t, setup{policies: policy("hot", spec), upstream: url})
			tenant := "X-Tenant-ID: " + namespace(t) + strconv.FormatInt(time.Now().UnixNano(), 36)
			load(t, []string{e.url}, 16, 700*time.Millisecond, tenant)
			g.Expect(metricValue(t, e, "sluice_enforcer_lease_grants_total", `policy="hot"`)).To(BeNumerically(">", 0), "the hot tenant leased")

			checker := e
			if how == "shutdown" {
				e.stop(t)
				checker = start(t, setup{policies: policy("hot", spec), upstream: url})
			} else {
				reloads := metricValue(t, e, "sluice_enforcer_config_reloads_total")
				// a new rule: the configuration changes, the hot rule does not
				g.Expect(os.WriteFile(e.configPath, []byte(policy("hot", spec+`
    - name: other
      match: {paths: [{prefix: /other}]}
      limits: [{requests: 5, period: 1m}]`)), 0o644)).To(Succeed())
				g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_config_reloads_total") }).
					WithTimeout(10 * time.Second).Should(BeNumerically(">", reloads))
			}
			// The first request of a bucket the enforcer has not seen (a new
			// process, or the entry a reload forgot) is a Redis decision: its
			// Remaining is what Redis holds after it.
			r := get(t, checker.url+"/v1/items", tenant)
			g.Expect(r.status).To(Equal(200))
			received := len(app.received())
			g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal(strconv.Itoa(capacity-received)),
				"every unit not admitted is back in Redis (%d admitted)", received)
		})
	}
}
