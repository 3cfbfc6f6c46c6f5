package enforcer

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// delaySpec is a policy whose search rule delays up to max.
func delaySpec(algorithm, limit, delay string) string {
	return policy("search", fmt.Sprintf(`  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: search
      algorithm: %s
      limits: [%s]
      onLimit: {delay: %s}`, algorithm, limit, delay))
}

func uniqueTenant(t *testing.T) string {
	return "X-Tenant-ID: " + namespace(t) + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// TestDelayNeverAdmitsMoreThanTheLimit: 20 clients on one tenant through
// two enforcers sharing Redis. Requests over the limit wait instead of
// being refused, yet the application never receives more than the limit
// allows by any time, no request waits much past max, and many waited.
func TestDelayNeverAdmitsMoreThanTheLimit(t *testing.T) {
	for _, algorithm := range []string{"TokenBucket", "GCRA"} {
		t.Run(algorithm, func(t *testing.T) {
			g := NewWithT(t)
			const rate, burst = 20.0, 5.0
			const maxWait = 300 * time.Millisecond
			app, url := newReceiptApp(t)
			policies := delaySpec(algorithm, "{requests: 20, period: 1s, burst: 5}", "{max: 300ms}")
			a := start(t, setup{policies: policies, upstream: url})
			b := start(t, setup{policies: policies, upstream: url})
			tenant := uniqueTenant(t)

			var mu sync.Mutex
			var longest time.Duration
			statuses := map[int]int{}
			var wg sync.WaitGroup
			begin := time.Now()
			stop := begin.Add(2 * time.Second)
			for c := range 20 {
				base := []string{a.url, b.url}[c%2]
				wg.Go(func() {
					for time.Now().Before(stop) {
						r := get(t, base+"/v1/search", tenant)
						mu.Lock()
						statuses[r.status]++
						if r.status == http.StatusOK {
							longest = maxDuration(longest, r.took)
						}
						mu.Unlock()
						if r.status == http.StatusTooManyRequests {
							time.Sleep(20 * time.Millisecond)
						}
					}
				})
			}
			wg.Wait()

			received := app.received()
			t.Logf("statuses %v, %d received, longest admitted request %s", statuses, len(received), longest)
			g.Expect(statuses[http.StatusOK]).To(Equal(len(received)), "every admitted request reached the application")
			g.Expect(statuses[http.StatusTooManyRequests]).To(BeNumerically(">", 0), "requests beyond max were refused")
			for i, at := range received {
				g.Expect(float64(i+1)).To(BeNumerically("<=", burst+rate*at.Sub(begin).Seconds()+1e-6),
					"%d requests reached the application %s after the start", i+1, at.Sub(begin))
			}
			// a delayed request waits at most max, plus the machine's own latency
			g.Expect(longest).To(BeNumerically("<", maxWait+700*time.Millisecond))
			delayed := metricValue(t, a, "sluice_enforcer_delayed_requests_total", `policy="search"`) +
				metricValue(t, b, "sluice_enforcer_delayed_requests_total", `policy="search"`)
			g.Expect(delayed).To(BeNumerically(">", 10), "requests over the limit waited")
			g.Expect(float64(len(received))).To(BeNumerically(">", burst+rate*1.5), "the waiting requests used the limit")
		})
	}
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

// TestDelayBeyondMaxIsRefusedAtOnce: a request whose capacity comes later
// than max gets 429 without waiting, with the Retry-After after which a
// retry would be delayed rather than refused.
func TestDelayBeyondMaxIsRefusedAtOnce(t *testing.T) {
	for _, algorithm := range []string{"TokenBucket", "GCRA"} {
		t.Run(algorithm, func(t *testing.T) {
			g := NewWithT(t)
			e := start(t, setup{policies: delaySpec(algorithm, "{requests: 1, period: 10s}", "{max: 2s}")})
			tenant := uniqueTenant(t)
			g.Expect(get(t, e.url+"/v1/search", tenant).status).To(Equal(http.StatusOK))
			r := get(t, e.url+"/v1/search", tenant)
			g.Expect(r.status).To(Equal(http.StatusTooManyRequests))
			g.Expect(r.took).To(BeNumerically("<", time.Second), "refused without waiting")
			g.Expect(r.header.Get("Retry-After")).To(Equal("8"), "10s until the unit, less the 2s it may wait")
			g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
		})
	}
}

// TestDelayCancelledWaitReturnsItsSlot: a client hanging up while its
// request waits gives its reservation back: it never reaches the
// application, and the next request gets its slot instead of the one after.
func TestDelayCancelledWaitReturnsItsSlot(t *testing.T) {
	for _, algorithm := range []string{"TokenBucket", "GCRA"} {
		t.Run(algorithm, func(t *testing.T) {
			g := NewWithT(t)
			app, url := newReceiptApp(t)
			// a unit every 2s; waits up to 5s
			e := start(t, setup{policies: delaySpec(algorithm, "{requests: 1, period: 2s}", "{max: 5s}"), upstream: url})
			tenant := uniqueTenant(t)
			first := get(t, e.url+"/v1/search", tenant)
			g.Expect(first.status).To(Equal(http.StatusOK))
			g.Expect(first.took).To(BeNumerically("<", time.Second))

			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			_, err := tryDo(ctx, http.MethodGet, e.url+"/v1/search", tenant)
			cancel()
			g.Expect(err).To(HaveOccurred(), "the client gave up waiting")
			g.Eventually(func() float64 {
				return metricValue(t, e, "sluice_enforcer_delay_cancelled_total", `policy="search"`)
			}).WithTimeout(5 * time.Second).Should(Equal(1.0))

			// the cancelled request's slot, 2s after the first, is free again
			next := get(t, e.url+"/v1/search", tenant)
			g.Expect(next.status).To(Equal(http.StatusOK))
			received := app.received()
			g.Expect(received).To(HaveLen(2), "the cancelled request never reached the application")
			g.Expect(received[1].Sub(received[0])).To(BeNumerically("<", 3*time.Second),
				"the next request went on at the cancelled one's slot (2s), not the one after (4s)")
			g.Expect(received[1].Sub(received[0])).To(BeNumerically(">=", 1900*time.Millisecond), "and no earlier")
		})
	}
}

// TestDelayQueueBounds: with a tenant's maxQueued (or the enforcer's
// --delay-max-queued) full, a request over the limit is refused at once
// with the reason in its body, booking nothing.
func TestDelayQueueBounds(t *testing.T) {
	for _, c := range []struct {
		name, delay string
		args        []string
		// tenants: one tenant for the rule's bound, one per request for the
		// enforcer's
		perRequestTenant bool
		scope            string
	}{
		{name: "tenant", delay: "{max: 10s, maxQueued: 2}", scope: "tenant"},
		{name: "enforcer", delay: "{max: 10s}", args: []string{"--delay-max-queued", "2"}, perRequestTenant: true, scope: "enforcer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			e := start(t, setup{policies: delaySpec("TokenBucket", "{requests: 1, period: 1s}", c.delay), args: c.args})
			tenants := make([]string, 5)
			base := uniqueTenant(t)
			for i := range tenants {
				tenants[i] = base
				if c.perRequestTenant {
					tenants[i] = fmt.Sprintf("%s-%d", base, i)
				}
				// every bucket spent: its next request waits
				g.Expect(get(t, e.url+"/v1/search", tenants[i]).status).To(Equal(http.StatusOK))
				if !c.perRequestTenant {
					break
				}
			}
			if !c.perRequestTenant {
				for i := range tenants {
					tenants[i] = base
				}
			}
			// two wait; the others find the queue full
			var wg sync.WaitGroup
			results := make([]response, len(tenants))
			for i := range 2 {
				wg.Go(func() { results[i] = get(t, e.url+"/v1/search", tenants[i]) })
			}
			g.Eventually(func() float64 { return metricValue(t, e, "sluice_enforcer_delay_queue_length") }).
				WithTimeout(5 * time.Second).Should(Equal(2.0))
			for i := 2; i < len(tenants); i++ {
				results[i] = get(t, e.url+"/v1/search", tenants[i])
			}
			wg.Wait()
			for i, r := range results {
				if i < 2 {
					g.Expect(r.status).To(Equal(http.StatusOK), "request %d waited its turn", i)
					continue
				}
				g.Expect(r.status).To(Equal(http.StatusTooManyRequests), "request %d found the queue full", i)
				g.Expect(r.took).To(BeNumerically("<", time.Second), "refused at once")
				g.Expect(r.body).To(ContainSubstring("wait queue was full"))
			}
			g.Expect(metricValue(t, e, "sluice_enforcer_delay_queue_full_total", `scope="`+c.scope+`"`)).To(Equal(3.0))
			g.Expect(metricValue(t, e, "sluice_enforcer_delay_queue_length")).To(Equal(0.0), "every place was given back")
			if !c.perRequestTenant {
				// the refused requests booked nothing: the next waits for the third unit
				r := get(t, e.url+"/v1/search", base)
				g.Expect(r.status).To(Equal(http.StatusOK))
				g.Expect(strings.Contains(r.body, "queue")).To(BeFalse())
			}
		})
	}
}
