package enforcer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/internal/testing/freeport"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// concurrencyPolicy limits each X-Tenant-ID to concurrent requests in
// flight, with failureMode mode; extra rules follow the Concurrency rule.
func concurrencyPolicy(concurrent int, mode, extra string) string {
	return fmt.Sprintf(`apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: php}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  responseHeaders: Both
  failureMode: %s
  timeout: 1s
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
  - {name: workers, algorithm: Concurrency, limits: [{concurrent: %d}]}
%s`, mode, concurrent, extra)
}

// inFlightApp is an application that counts its own requests in flight per
// tenant (X-Tenant-ID) and remembers the most it saw. GET /slow?ms=N
// answers after N ms; /fail breaks its connection off after N ms; /stream
// sends a chunk every 50 ms for N ms.
type inFlightApp struct {
	url     string
	mu      sync.Mutex
	now     map[string]int
	most    map[string]int
	order   map[string][]string // X-Seq of the tenant's requests, as they came
	started atomic.Int64
}

func newInFlightApp(t *testing.T) *inFlightApp {
	a := &inFlightApp{now: map[string]int{}, most: map[string]int{}, order: map[string][]string{}}
	srv := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

func (a *inFlightApp) serve(w http.ResponseWriter, r *http.Request) {
	tenant := r.Header.Get("X-Tenant-ID")
	a.started.Add(1)
	a.mu.Lock()
	a.now[tenant]++
	a.most[tenant] = max(a.most[tenant], a.now[tenant])
	if seq := r.Header.Get("X-Seq"); seq != "" {
		a.order[tenant] = append(a.order[tenant], seq)
	}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.now[tenant]--
		a.mu.Unlock()
	}()
	ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
	d := time.Duration(ms) * time.Millisecond
	switch r.URL.Path {
	case "/fail":
		time.Sleep(d)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	case "/stream":
		w.WriteHeader(http.StatusOK)
		for end := time.Now().Add(d); time.Now().Before(end); {
			_, _ = io.WriteString(w, "chunk\n")
			_ = http.NewResponseController(w).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	default:
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "ok")
	}
}

func (a *inFlightApp) mostInFlight(tenant string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.most[tenant]
}

func (a *inFlightApp) inFlight(tenant string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.now[tenant]
}

// admitsSoon reports whether a quick request of tenant through in is
// admitted before the slots of a holder that stopped renewing would have
// expired: a slot came back because it was given back.
func admitsSoon(t *testing.T, in *instance, tenant string) {
	t.Helper()
	start := time.Now()
	Eventually(func() int {
		return get(t, in.url+"/slow?ms=1", "X-Tenant-ID: "+tenant).status
	}, limiter.SlotExpiry*7/10, 50*time.Millisecond).Should(Equal(http.StatusOK), "the slot is given back, not left to expire")
	t.Logf("slot free again after %s", time.Since(start).Round(time.Millisecond))
}

func TestConcurrency64ClientsThroughTwoEnforcersNeverExceedTheLimit(t *testing.T) {
	RegisterTestingT(t)
	app := newInFlightApp(t)
	policy := concurrencyPolicy(4, "Closed", "")
	a := start(t, setup{policies: policy, upstream: app.url})
	b := start(t, setup{policies: policy, upstream: app.url})

	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	var headerMu sync.Mutex
	var policyHeader, retryAfter string
	for i := range 64 {
		in := a
		if i%2 == 1 {
			in = b
		}
		wg.Go(func() {
			for range 4 {
				r, err := tryDo(context.Background(), http.MethodGet, in.url+"/slow?ms=150", "X-Tenant-ID: acme")
				if err != nil {
					t.Errorf("request: %v", err)
					return
				}
				switch r.status {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
					headerMu.Lock()
					policyHeader, retryAfter = r.header.Get("RateLimit-Policy"), r.header.Get("Retry-After")
					headerMu.Unlock()
				default:
					t.Errorf("status %d: %s", r.status, r.body)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("admitted %d, refused %d, most in flight at the application %d", ok.Load(), refused.Load(), app.mostInFlight("acme"))
	Expect(app.mostInFlight("acme")).To(BeNumerically("<=", 4), "never more than 4 of the tenant's requests at the application")
	Expect(app.mostInFlight("acme")).To(BeNumerically(">=", 2), "both enforcers admitted at once")
	Expect(ok.Load()).To(BeNumerically(">=", 4))
	Expect(refused.Load()).To(BeNumerically(">", 0))
	Expect(policyHeader).To(Equal(`"php/workers";q=4;qu="concurrent-requests"`))
	Expect(strconv.Atoi(retryAfter)).To(BeNumerically(">=", 1))

	// every slot came back: 4 at once pass again, through either enforcer
	Eventually(func() int {
		var wg sync.WaitGroup
		var passed atomic.Int64
		for i := range 4 {
			in := []*instance{a, b}[i%2]
			wg.Go(func() {
				if r, err := tryDo(context.Background(), http.MethodGet, in.url+"/slow?ms=300", "X-Tenant-ID: acme"); err == nil && r.status == http.StatusOK {
					passed.Add(1)
				}
			})
		}
		wg.Wait()
		return int(passed.Load())
	}, 20*time.Second, 200*time.Millisecond).Should(Equal(4))
	// another tenant has slots of its own
	Expect(get(t, a.url+"/slow?ms=1", "X-Tenant-ID: other").status).To(Equal(http.StatusOK))
}

func TestConcurrencySlotsComeBackWhenTheClientHangsUpTheUpstreamFailsOrAStreamEnds(t *testing.T) {
	RegisterTestingT(t)
	app := newInFlightApp(t)
	in := start(t, setup{policies: concurrencyPolicy(1, "Closed", ""), upstream: app.url})

	t.Run("client hang-up", func(t *testing.T) {
		RegisterTestingT(t)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := tryDo(ctx, http.MethodGet, in.url+"/slow?ms=20000", "X-Tenant-ID: hangup")
		Expect(err).To(HaveOccurred(), "the client gave up")
		admitsSoon(t, in, "hangup")
	})
	t.Run("upstream failure", func(t *testing.T) {
		RegisterTestingT(t)
		r := get(t, in.url+"/fail?ms=100", "X-Tenant-ID: failing")
		Expect(r.status).To(BeNumerically(">=", 500))
		admitsSoon(t, in, "failing")
	})
	t.Run("stream", func(t *testing.T) {
		RegisterTestingT(t)
		done := make(chan response, 1)
		go func() {
			r, _ := tryDo(context.Background(), http.MethodGet, in.url+"/stream?ms=2500", "X-Tenant-ID: streaming")
			done <- r
		}()
		Eventually(func() int { return app.inFlight("streaming") }, 10*time.Second, 10*time.Millisecond).Should(Equal(1))
		r := get(t, in.url+"/slow?ms=1", "X-Tenant-ID: streaming")
		Expect(r.status).To(Equal(http.StatusTooManyRequests), "the stream holds its slot while it runs")
		Expect(r.body).To(ContainSubstring("allows 1 requests in flight at once"))
		Expect((<-done).body).To(ContainSubstring("chunk"))
		admitsSoon(t, in, "streaming")
	})
	t.Run("upstream timeout", func(t *testing.T) {
		RegisterTestingT(t)
		slow := start(t, setup{policies: concurrencyPolicy(1, "Closed", ""), upstream: app.url,
			args: []string{"--response-header-timeout", "300ms"}})
		r := get(t, slow.url+"/slow?ms=20000", "X-Tenant-ID: timeout")
		Expect(r.status).To(Equal(http.StatusGatewayTimeout))
		admitsSoon(t, slow, "timeout")
	})
}

func TestConcurrencySlotsOfAKilledEnforcerFreeWithinTheExpiry(t *testing.T) {
	RegisterTestingT(t)
	app := newInFlightApp(t)
	policy := concurrencyPolicy(2, "Closed", "")
	doomed := start(t, setup{policies: policy, upstream: app.url})
	survivor := start(t, setup{policies: policy, upstream: app.url})
	for range 2 {
		go func() {
			_, _ = tryDo(context.Background(), http.MethodGet, doomed.url+"/slow?ms=60000", "X-Tenant-ID: acme")
		}()
	}
	Eventually(func() int { return app.inFlight("acme") }, 10*time.Second, 10*time.Millisecond).Should(Equal(2))
	Expect(get(t, survivor.url+"/slow?ms=1", "X-Tenant-ID: acme").status).To(Equal(http.StatusTooManyRequests))
	// let a renewal or two pass first, so the bound is measured from a
	// renewal, not from the takes
	time.Sleep(limiter.SlotRenewal + time.Second)
	Expect(doomed.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
	killed := time.Now()
	<-doomed.exited
	Eventually(func() int {
		return get(t, survivor.url+"/slow?ms=1", "X-Tenant-ID: acme").status
	}, limiter.SlotExpiry+20*time.Second, 100*time.Millisecond).Should(Equal(http.StatusOK))
	freed := time.Since(killed)
	t.Logf("slots of the killed enforcer free %s after SIGKILL (bound: %s)", freed.Round(time.Millisecond), limiter.SlotExpiry)
	Expect(freed).To(BeNumerically("<=", limiter.SlotExpiry+15*time.Second), "within the expiry, with the loaded machine's slack")
}

func TestConcurrencyThroughARedisOutage(t *testing.T) {
	RegisterTestingT(t)
	server := redistest.Start(t)
	app := newInFlightApp(t)
	in := start(t, setup{policies: concurrencyPolicy(3, "LocalFallback", ""), upstream: app.url, redisURL: server.URL()})
	// one slot taken in Redis before it goes; it is given back while Redis
	// is away
	held := make(chan response, 1)
	go func() {
		r, _ := tryDo(context.Background(), http.MethodGet, in.url+"/slow?ms=1500", "X-Tenant-ID: acme")
		held <- r
	}()
	Eventually(func() int { return app.inFlight("acme") }, 10*time.Second, 10*time.Millisecond).Should(Equal(1))
	server.Stop()
	Expect((<-held).status).To(Equal(http.StatusOK))

	// Redis away: this enforcer alone holds its share (3 for one replica)
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			_, _ = tryDo(context.Background(), http.MethodGet, in.url+"/slow?ms=300", "X-Tenant-ID: local")
		})
	}
	wg.Wait()
	Expect(app.mostInFlight("local")).To(BeNumerically("<=", 3))

	Expect(server.Restart()).To(Succeed())
	// back: all 3 slots free in Redis (none leaked by the give-back sent
	// while it was away, none counted for the local admissions)
	Eventually(func() int {
		var passed atomic.Int64
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				r, err := tryDo(context.Background(), http.MethodGet, in.url+"/slow?ms=300", "X-Tenant-ID: acme")
				if err == nil && r.status == http.StatusOK && strings.Contains(r.header.Get("RateLimit-Policy"), "workers") {
					passed.Add(1)
				}
			})
		}
		wg.Wait()
		return int(passed.Load())
	}, 30*time.Second, 200*time.Millisecond).Should(Equal(3))
	Expect(get(t, in.url+"/slow?ms=1", "X-Tenant-ID: acme").header.Get("RateLimit-Policy")).To(ContainSubstring(`qu="concurrent-requests"`),
		"decided by Redis again")
}

func TestConcurrencyBesideARateLimitOnOneRoute(t *testing.T) {
	RegisterTestingT(t)
	app := newInFlightApp(t)
	policy := concurrencyPolicy(2, "Closed", "  - {name: rate, limits: [{requests: 3, period: 1h}]}\n")
	in := start(t, setup{policies: policy, upstream: app.url})
	done := make(chan int, 2)
	for range 2 {
		go func() { done <- get(t, in.url+"/slow?ms=1500", "X-Tenant-ID: acme").status }()
	}
	Eventually(func() int { return app.inFlight("acme") }, 10*time.Second, 10*time.Millisecond).Should(Equal(2))
	r := get(t, in.url+"/slow?ms=1", "X-Tenant-ID: acme")
	Expect(r.status).To(Equal(http.StatusTooManyRequests))
	Expect(r.body).To(ContainSubstring("workers"), "refused by the Concurrency rule")
	Expect(<-done).To(Equal(http.StatusOK))
	Expect(<-done).To(Equal(http.StatusOK))
	// the refused request took nothing of the rate: 1 of 3 is left
	admitsSoon(t, in, "acme")
	r = get(t, in.url+"/slow?ms=1", "X-Tenant-ID: acme")
	Expect(r.status).To(Equal(http.StatusTooManyRequests))
	Expect(r.body).To(ContainSubstring("Rule rate of policy php allows 3 requests per 1h"))
}

func TestConcurrencyDebugTenantListsSlotsByEnforcerAndMetricsCountThem(t *testing.T) {
	RegisterTestingT(t)
	app := newInFlightApp(t)
	policy := concurrencyPolicy(3, "Closed", "")
	addrs, err := freeport.LoopbackAddrs(1)
	Expect(err).NotTo(HaveOccurred())
	debugAddr := addrs[0]
	holder := start(t, setup{policies: policy, upstream: app.url})
	asker := start(t, setup{policies: policy, upstream: app.url, args: []string{"--debug-listen", debugAddr}})
	done := make(chan struct{})
	for range 2 {
		go func() {
			_, _ = tryDo(context.Background(), http.MethodGet, holder.url+"/slow?ms=4000", "X-Tenant-ID: acme")
			done <- struct{}{}
		}()
	}
	Eventually(func() int { return app.inFlight("acme") }, 10*time.Second, 10*time.Millisecond).Should(Equal(2))
	Expect(metricValue(t, holder, "sluice_enforcer_concurrency_slots", `policy="php"`)).To(Equal(2.0))

	r := get(t, "http://"+debugAddr+"/debug/tenant?policy=php&rule=workers&tenant=acme")
	Expect(r.status).To(Equal(http.StatusOK), r.body)
	var usage struct {
		Algorithm string `json:"algorithm"`
		Remaining int64  `json:"remaining"`
		Windows   []struct {
			Concurrent int64 `json:"concurrent"`
		} `json:"windows"`
		Slots []struct {
			Enforcer string `json:"enforcer"`
			Slots    int64  `json:"slots"`
		} `json:"slots"`
	}
	Expect(json.Unmarshal([]byte(r.body), &usage)).To(Succeed(), r.body)
	Expect(usage.Algorithm).To(Equal("Concurrency"))
	Expect(usage.Remaining).To(Equal(int64(1)))
	Expect(usage.Windows).To(HaveLen(1))
	Expect(usage.Windows[0].Concurrent).To(Equal(int64(3)))
	Expect(usage.Slots).To(HaveLen(1), "one enforcer holds the tenant's slots: %s", r.body)
	Expect(usage.Slots[0].Slots).To(Equal(int64(2)))

	// one more fits, the next is refused and counted
	go func() {
		_, _ = tryDo(context.Background(), http.MethodGet, asker.url+"/slow?ms=4000", "X-Tenant-ID: acme")
		done <- struct{}{}
	}()
	Eventually(func() int { return app.inFlight("acme") }, 10*time.Second, 10*time.Millisecond).Should(Equal(3))
	Expect(get(t, asker.url+"/slow?ms=1", "X-Tenant-ID: acme").status).To(Equal(http.StatusTooManyRequests))
	Expect(metricValue(t, asker, "sluice_enforcer_concurrency_refused_total", `policy="php"`)).To(Equal(1.0))
	for range 3 {
		<-done
	}
	Eventually(func() float64 {
		return metricValue(t, holder, "sluice_enforcer_concurrency_slots", `policy="php"`)
	}, 10*time.Second, 50*time.Millisecond).Should(Equal(0.0))
}

func (a *inFlightApp) arrivals(tenant string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.order[tenant]...)
}

func TestConcurrencyDelayWaitsForASlotInArrivalOrderUpToMax(t *testing.T) {
	RegisterTestingT(t)
	app := newInFlightApp(t)
	policy := strings.Replace(concurrencyPolicy(1, "Closed", ""), "limits: [{concurrent: 1}]}",
		"limits: [{concurrent: 1}], onLimit: {delay: {max: 5s, maxQueued: 2}}}", 1)
	in := start(t, setup{policies: policy, upstream: app.url})

	results := make(chan string, 3)
	send := func(seq string, ms int) {
		r, err := tryDo(context.Background(), http.MethodGet, fmt.Sprintf("%s/slow?ms=%d", in.url, ms), "X-Tenant-ID: acme", "X-Seq: "+seq)
		if err != nil {
			results <- seq + " " + err.Error()
			return
		}
		results <- fmt.Sprintf("%s %d", seq, r.status)
	}
	go send("a", 1500)
	Eventually(func() []string { return app.arrivals("acme") }, 10*time.Second, 10*time.Millisecond).Should(Equal([]string{"a"}))
	go send("b", 200)
	Eventually(func() int { return waiting(t, in) }, 10*time.Second, 10*time.Millisecond).Should(Equal(1))
	go send("c", 200)
	Eventually(func() int { return waiting(t, in) }, 10*time.Second, 10*time.Millisecond).Should(Equal(2))
	r := get(t, in.url+"/slow?ms=1", "X-Tenant-ID: acme", "X-Seq: d")
	Expect(r.status).To(Equal(http.StatusTooManyRequests), "a third waiter finds the queue (maxQueued 2) full")
	var got []string
	for range 3 {
		got = append(got, <-results)
	}
	Expect(got).To(ConsistOf("a 200", "b 200", "c 200"))
	Expect(app.arrivals("acme")).To(Equal([]string{"a", "b", "c"}), "the waiters got the slot in arrival order")
	Expect(app.mostInFlight("acme")).To(Equal(1))

	// a wait longer than delay.max is refused once max has passed
	r = get(t, in.url+"/slow?ms=1", "X-Tenant-ID: acme", "X-Seq: probe")
	Expect(r.status).To(Equal(http.StatusOK), func() string {
		return r.body + "\n" + get(t, "http://127.0.0.1:9902/debug/tenant?policy=php&rule=workers&tenant=acme").body
	})
	go send("long", 15000)
	Eventually(func() []string { return app.arrivals("acme") }, 10*time.Second, 10*time.Millisecond).Should(HaveLen(5), func() string {
		select {
		case r := <-results:
			return r + "\n" + in.logs.String()
		default:
			return in.logs.String()
		}
	})
	r = get(t, in.url+"/slow?ms=1", "X-Tenant-ID: acme", "X-Seq: late")
	Expect(r.status).To(Equal(http.StatusTooManyRequests))
	Expect(r.took).To(BeNumerically(">=", 5*time.Second), "it waited delay.max first")
	Expect(r.header.Get("Retry-After")).NotTo(BeEmpty())
}

// waiting is how many requests wait for a slot in the enforcer, from its
// metrics.
func waiting(t *testing.T, in *instance) int {
	return int(metricValue(t, in, "sluice_enforcer_concurrency_waiting"))
}

func TestConcurrencyInDryRunForwardsWhatItWouldRefuse(t *testing.T) {
	RegisterTestingT(t)
	app := newInFlightApp(t)
	policy := strings.Replace(concurrencyPolicy(1, "Closed", ""), "  responseHeaders: Both\n", "  responseHeaders: Both\n  mode: DryRun\n", 1)
	in := start(t, setup{policies: policy, upstream: app.url})
	done := make(chan int, 1)
	go func() { done <- get(t, in.url+"/slow?ms=1500", "X-Tenant-ID: acme").status }()
	Eventually(func() int { return app.inFlight("acme") }, 10*time.Second, 10*time.Millisecond).Should(Equal(1))
	r := get(t, in.url+"/slow?ms=1", "X-Tenant-ID: acme")
	Expect(r.status).To(Equal(http.StatusOK), "DryRun never refuses")
	Expect(r.header.Get("X-Sluice-Would-Deny")).To(Equal("php/workers"))
	Expect(<-done).To(Equal(http.StatusOK))
	Expect(metricValue(t, in, "sluice_enforcer_concurrency_refused_total", `policy="php"`)).To(Equal(1.0))
	admitsSoon(t, in, "acme")
	Expect(get(t, in.url+"/slow?ms=1", "X-Tenant-ID: acme").header.Get("X-Sluice-Would-Deny")).To(BeEmpty(),
		"the request it would have refused held no slot")
}

func TestConcurrencyRefusalsBanATenant(t *testing.T) {
	RegisterTestingT(t)
	app := newInFlightApp(t)
	policy := strings.Replace(concurrencyPolicy(1, "Closed", ""), "limits: [{concurrent: 1}]}",
		"limits: [{concurrent: 1}], ban: {after: {denials: 3, within: 1m}, durations: [1m]}}", 1)
	in := start(t, setup{policies: policy, upstream: app.url})
	done := make(chan int, 1)
	go func() { done <- get(t, in.url+"/slow?ms=3000", "X-Tenant-ID: acme").status }()
	Eventually(func() int { return app.inFlight("acme") }, 10*time.Second, 10*time.Millisecond).Should(Equal(1))
	for i := range 3 {
		r := get(t, in.url+"/slow?ms=1", "X-Tenant-ID: acme")
		Expect(r.status).To(Equal(http.StatusTooManyRequests), "refusal %d", i+1)
	}
	Expect(<-done).To(Equal(http.StatusOK))
	r := get(t, in.url+"/slow?ms=1", "X-Tenant-ID: acme")
	Expect(r.status).To(Equal(http.StatusTooManyRequests), "banned, although a slot is free")
	Expect(r.body).To(ContainSubstring("https://sluice.dev/problems/banned"))
	Expect(get(t, in.url+"/slow?ms=1", "X-Tenant-ID: other").status).To(Equal(http.StatusOK))
}

func TestConcurrencyRefusalsUnderLoadTakeNothingOfTheRate(t *testing.T) {
	RegisterTestingT(t)
	app := newInFlightApp(t)
	const rate = 300
	policy := concurrencyPolicy(2, "Closed", fmt.Sprintf("  - {name: rate, limits: [{requests: %d, period: 1h}]}\n", rate))
	in := start(t, setup{policies: policy, upstream: app.url})
	tenant := fmt.Sprintf("X-Tenant-ID: acme-%d", time.Now().UnixNano())

	// 24 clients against 2 slots: most requests are refused by the
	// Concurrency rule, and each of them must give back what the rate
	// rule counted for it.
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				r := get(t, in.url+"/slow?ms=100", tenant)
				switch {
				case r.status == http.StatusOK:
					admitted.Add(1)
				case r.status == http.StatusTooManyRequests && strings.Contains(r.body, "workers"):
					refused.Add(1)
				default:
					t.Errorf("status %d: %s", r.status, r.body)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("under load: %d admitted, %d refused by the Concurrency rule", admitted.Load(), refused.Load())
	Expect(refused.Load()).To(BeNumerically(">", admitted.Load()), "the load refuses more than it admits")
	Expect(admitted.Load()).To(BeNumerically("<", rate))

	// What is left of the rate is the limit less the admitted requests.
	after := 0
	for ; after <= rate; after++ {
		r := get(t, in.url+"/slow?ms=1", tenant)
		if r.status == http.StatusTooManyRequests && strings.Contains(r.body, "workers") {
			// the slot of the request before is on its way back
			time.Sleep(20 * time.Millisecond)
			after--
			continue
		}
		if r.status != http.StatusOK {
			Expect(r.body).To(ContainSubstring("Rule rate of policy php"), "refused by the rate rule")
			break
		}
	}
	Expect(int64(after)).To(Equal(rate-admitted.Load()), "every refused request's unit of the rate came back")
}
