package enforcer

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	enforcerstatus "github.com/sluice-dev/sluice/enforcer/status"
)

// healthApp is an application whose latency and error rate the test sets
// while it runs.
type healthApp struct {
	delay atomic.Int64 // ns before answering
	// failEvery answers every n-th request 500 (0: none).
	failEvery atomic.Int64
	seen      atomic.Int64
	mu        sync.Mutex
	times     []time.Time
}

func newHealthApp(t *testing.T) (*healthApp, string) {
	a := &healthApp{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.times = append(a.times, time.Now())
		a.mu.Unlock()
		time.Sleep(time.Duration(a.delay.Load()))
		if n := a.failEvery.Load(); n > 0 && a.seen.Add(1)%n == 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return a, srv.URL
}

// admitted is how many requests reached the application in [from, to).
func (a *healthApp) admitted(from, to time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, at := range a.times {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// adaptiveTraffic keeps clients busy against each base URL until stopped, and
// remembers the lowest X-RateLimit-Limit any response carried.
type adaptiveTraffic struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	lowest  atomic.Int64
	answers atomic.Int64
}

func startAdaptiveTraffic(t *testing.T, bases []string, clients int, headers ...string) *adaptiveTraffic {
	tr := &adaptiveTraffic{stop: make(chan struct{})}
	tr.lowest.Store(1 << 40)
	for _, base := range bases {
		for range clients {
			tr.wg.Go(func() {
				for {
					select {
					case <-tr.stop:
						return
					default:
					}
					r, err := tryDo(context.Background(), http.MethodGet, base+"/v1/items", headers...)
					if err != nil {
						continue
					}
					if r.status == http.StatusTooManyRequests {
						time.Sleep(5 * time.Millisecond) // a client backing off a little
					}
					if l, err := strconv.ParseInt(r.header.Get("X-RateLimit-Limit"), 10, 64); err == nil {
						tr.answers.Add(1)
						for {
							low := tr.lowest.Load()
							if l >= low || tr.lowest.CompareAndSwap(low, l) {
								break
							}
						}
					}
				}
			})
		}
	}
	t.Cleanup(tr.end)
	return tr
}

func (tr *adaptiveTraffic) end() {
	select {
	case <-tr.stop:
	default:
		close(tr.stop)
	}
	tr.wg.Wait()
}

// adaptiveLimitOf is the X-RateLimit-Limit a fresh request to base gets (another
// tenant than the traffic's, whose bucket is full).
func adaptiveLimitOf(t *testing.T, base string) int64 {
	r, err := tryDo(context.Background(), http.MethodGet, base+"/v1/items", "X-Tenant-ID: probe")
	if err != nil {
		return -1
	}
	l, err := strconv.ParseInt(r.header.Get("X-RateLimit-Limit"), 10, 64)
	if err != nil {
		t.Logf("no X-RateLimit-Limit (%d): %v", r.status, r.header)
		return -1
	}
	return l
}

const adaptiveSpec = `  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: api
      algorithm: TokenBucket
      limits: [{requests: 100, period: 1s}]
      adaptive:
        target: {latency: 50ms, errorRate: 5%}
        minimum: 25%
        interval: 1s`

// Two enforcers sharing Redis: a slow application tightens the limit of
// both to the same factor, never below the minimum, and fewer requests
// reach it; once it is fast again both recover the full limit.
func TestAdaptiveSlowApplicationTightensAndRecovers(t *testing.T) {
	g := NewWithT(t)
	app, url := newHealthApp(t)
	policies := policy("adaptive", adaptiveSpec)
	a := start(t, setup{policies: policies, upstream: url})
	b := start(t, setup{policies: policies, upstream: url})
	g.Expect(adaptiveLimitOf(t, a.url)).To(Equal(int64(100)), "healthy: the configured limit")

	app.delay.Store(int64(120 * time.Millisecond))
	tr := startAdaptiveTraffic(t, []string{a.url, b.url}, 8, "X-Tenant-ID: busy")
	// 100% -> 70% -> 49% -> 34% -> 25% (the minimum), one step per interval
	g.Eventually(func() int64 { return adaptiveLimitOf(t, a.url) }).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).
		Should(Equal(int64(25)), "the limit falls to the minimum while the application is slow:\n%s", a.logs)
	g.Eventually(func() int64 { return adaptiveLimitOf(t, b.url) }).WithTimeout(5*time.Second).WithPolling(100*time.Millisecond).
		Should(Equal(int64(25)), "the other replica applies the same factor")
	// both stay at the minimum, and agree, while the application stays slow
	from := time.Now()
	g.Consistently(func() [2]int64 { return [2]int64{adaptiveLimitOf(t, a.url), adaptiveLimitOf(t, b.url)} }).
		WithTimeout(3 * time.Second).WithPolling(250 * time.Millisecond).Should(Equal([2]int64{25, 25}))
	to := time.Now()
	// the busy tenant's requests that reach the application: at most the
	// bucket (25) plus 25 per second across both replicas; the probes add 2
	// per poll. Unthrottled, 16 clients at 120 ms would send ~130/s.
	seconds := to.Sub(from).Seconds()
	g.Expect(app.admitted(from, to)).To(BeNumerically("<=", 25+25*seconds+2*(seconds/0.25+2)+5),
		"admissions follow the effective limit")
	g.Expect(tr.lowest.Load()).To(BeNumerically(">=", 25), "never below the minimum")
	// a refusal reports the effective limit in its headers and its body
	refused := adaptiveRefusal(t, a.url, "X-Tenant-ID: busy")
	g.Expect(refused.header.Get("X-RateLimit-Limit")).To(Equal("25"))
	g.Expect(refused.header.Get("RateLimit-Policy")).To(ContainSubstring(";q=25;"))
	g.Expect(refused.body).To(ContainSubstring("allows 25 requests per"))
	g.Expect(refused.body).To(ContainSubstring("at 25% of its configured value"))
	g.Expect(metricValue(t, a, "sluice_enforcer_adaptive_factor", `policy="adaptive"`, `rule="api"`)).To(Equal(0.25))
	g.Expect(metricValue(t, b, "sluice_enforcer_effective_limit", `policy="adaptive"`, `rule="api"`)).To(Equal(25.0))

	app.delay.Store(0)
	g.Eventually(func() [2]int64 { return [2]int64{adaptiveLimitOf(t, a.url), adaptiveLimitOf(t, b.url)} }).
		WithTimeout(40*time.Second).WithPolling(200*time.Millisecond).
		Should(Equal([2]int64{100, 100}), "both recover the full limit once the application is healthy")
	tr.end()
	g.Expect(tr.answers.Load()).To(BeNumerically(">", 100))
	g.Expect(tr.lowest.Load()).To(Equal(int64(25)), "the lowest limit any response reported is the minimum")
}

// 5xx responses over the error rate target tighten the limit too.
func TestAdaptiveErrorsTighten(t *testing.T) {
	g := NewWithT(t)
	app, url := newHealthApp(t)
	policies := policy("adaptive", adaptiveSpec)
	debugAddr, _ := freeAddrs(t)
	a := start(t, setup{policies: policies, upstream: url, args: []string{"--debug-listen", debugAddr}})
	b := start(t, setup{policies: policies, upstream: url})
	app.failEvery.Store(5) // 20% errors, fast
	startAdaptiveTraffic(t, []string{a.url, b.url}, 4, "X-Tenant-ID: busy")
	g.Eventually(func() int64 { return adaptiveLimitOf(t, a.url) }).WithTimeout(20*time.Second).WithPolling(200*time.Millisecond).
		Should(BeNumerically("<", 100), "errors tighten the limit:\n%s", a.logs)
	// the replicas read the shared factor a quarter interval apart
	g.Eventually(func() [2]int64 { return [2]int64{adaptiveLimitOf(t, a.url), adaptiveLimitOf(t, b.url)} }).
		WithTimeout(20*time.Second).WithPolling(200*time.Millisecond).
		Should(Equal([2]int64{25, 25}), "both replicas reach the minimum")

	// /debug/tenant shows the factor next to the bucket, /status the rule's state
	var usage struct {
		Limit   int64 `json:"limit"`
		Windows []struct {
			Requests int64 `json:"requests"`
		} `json:"windows"`
		Adaptive *struct {
			Factor     string `json:"factor"`
			Configured []struct {
				Requests int64 `json:"requests"`
			} `json:"configured"`
		} `json:"adaptive"`
	}
	r := get(t, "http://"+debugAddr+"/debug/tenant?policy=adaptive&rule=api&tenant=busy")
	g.Expect(r.status).To(Equal(200), "%s", r.body)
	g.Expect(json.Unmarshal([]byte(r.body), &usage)).To(Succeed())
	g.Expect(usage.Adaptive).NotTo(BeNil(), "%s", r.body)
	g.Expect(usage.Adaptive.Factor).To(Equal("25%"), "%s", r.body)
	g.Expect(usage.Adaptive.Configured[0].Requests).To(Equal(int64(100)), "%s", r.body)
	g.Expect(usage.Windows[0].Requests).To(Equal(int64(25)), "%s", r.body)
	g.Expect(usage.Limit).To(Equal(int64(25)), "%s", r.body)
	var doc enforcerstatus.Document
	g.Expect(json.Unmarshal([]byte(get(t, b.admin+enforcerstatus.Path).body), &doc)).To(Succeed())
	g.Expect(doc.Policies).To(HaveLen(1))
	g.Expect(doc.Policies[0].Adaptive).To(HaveLen(1))
	g.Expect(doc.Policies[0].Adaptive[0].Factor).To(Equal(int64(2500)))
	g.Expect(doc.Policies[0].Adaptive[0].Limits[0].Requests).To(Equal(int64(25)))
	g.Expect(doc.Policies[0].Adaptive[0].ErrorRate).To(BeNumerically(">", 0.05), "the 5xx share across replicas")

	app.failEvery.Store(0)
	g.Eventually(func() int64 { return adaptiveLimitOf(t, b.url) }).WithTimeout(40*time.Second).WithPolling(200*time.Millisecond).
		Should(Equal(int64(100)), "the limit recovers once errors stop")
}

// adaptiveRefusal is a 429 the busy tenant gets from base, whose bucket the
// adaptiveTraffic keeps empty.
func adaptiveRefusal(t *testing.T, base string, headers ...string) response {
	for range 200 {
		r, err := tryDo(context.Background(), http.MethodGet, base+"/v1/items", headers...)
		if err == nil && r.status == http.StatusTooManyRequests {
			return r
		}
	}
	t.Fatal("no request of the busy tenant was refused")
	return response{}
}
