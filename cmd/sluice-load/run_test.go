package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestScheduleSpacesRequestsEvenly(t *testing.T) {
	g := NewWithT(t)
	g.Expect(due(2000, 0)).To(Equal(time.Duration(0)))
	g.Expect(due(2000, 1)).To(Equal(500 * time.Microsecond))
	g.Expect(due(2000, 2000)).To(Equal(time.Second))
	g.Expect(due(3, 1)).To(Equal(333333333 * time.Nanosecond))
	g.Expect(plannedRequests(2000, 10*time.Second)).To(Equal(uint64(20000)))
	g.Expect(plannedRequests(0.5, 3*time.Second)).To(Equal(uint64(1)))
	g.Expect(plannedRequests(1000, 0)).To(BeZero())
	// 0.1*30 is 2.9999999999999996 in floating point: still three requests.
	g.Expect(plannedRequests(0.1, 30*time.Second)).To(Equal(uint64(3)))

	s := newSchedule(time.Now(), plan{Rate: 100, Warmup: time.Second, Duration: 2 * time.Second, MaxRequests: 50})
	g.Expect(s.warmupN).To(Equal(uint64(100)))
	g.Expect(s.total).To(Equal(uint64(150)))
}

// upstreamServer is an httptest server answering with code, after delay,
// that records when each request arrived.
func upstreamServer(t *testing.T, delay time.Duration, code func(r *http.Request) int) (*httptest.Server, *arrivals) {
	a := &arrivals{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.add(time.Now())
		time.Sleep(delay)
		w.WriteHeader(code(r))
		w.Write([]byte("ok\n"))
	}))
	t.Cleanup(srv.Close)
	return srv, a
}

type arrivals struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *arrivals) add(t time.Time) { a.mu.Lock(); a.times = append(a.times, t); a.mu.Unlock() }
func (a *arrivals) all() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.times...)
}

func ok(*http.Request) int { return http.StatusOK }

func mustTarget(t *testing.T, url string, headers []string, tenants int) *target {
	t.Helper()
	tg, err := newTarget(context.Background(), url, "GET", headers, tenants)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestOpenModelSendsAtTheRate(t *testing.T) {
	g := NewWithT(t)
	srv, arr := upstreamServer(t, 0, ok)
	p := plan{Rate: 500, Concurrency: 8, Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond, Timeout: time.Second}
	begin := time.Now()
	o := run(context.Background(), mustTarget(t, srv.URL, nil, 1), p)
	r := newReport(mustTarget(t, srv.URL, nil, 1), p, o)

	// Timing assertions are lower bounds, which a busy machine cannot break:
	// the k-th request to arrive was due no earlier than k/rate, so the run
	// took its full time and requests never ran ahead of the schedule.
	g.Expect(time.Since(begin)).To(BeNumerically(">=", 498*time.Millisecond))
	g.Expect(time.Since(begin)).To(BeNumerically("<", 5*time.Second))
	times := arr.all()
	g.Expect(times).To(HaveLen(250)) // 50 in the warm-up, then 200
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	for k, at := range times {
		g.Expect(at.Sub(begin)).To(BeNumerically(">=", due(p.Rate, uint64(k))), "arrival %d", k)
	}
	g.Expect(r.Requests).To(Equal(uint64(200)))
	g.Expect(r.Status.OK).To(Equal(uint64(200)))
	g.Expect(r.RPS).To(SatisfyAll(BeNumerically(">", 0), BeNumerically("<=", 505)))
	g.Expect(r.Errors).To(BeZero())
}

func TestOpenModelCountsQueueingWhenTheServerFallsBehind(t *testing.T) {
	g := NewWithT(t)
	// One connection, a request due every 5ms, each answered in 20ms: the
	// n-th request starts about 15n ms late, and its latency must say so.
	srv, _ := upstreamServer(t, 20*time.Millisecond, ok)
	p := plan{Rate: 200, Concurrency: 1, Duration: 200 * time.Millisecond, Timeout: time.Second}
	o := run(context.Background(), mustTarget(t, srv.URL, nil, 1), p)
	r := newReport(mustTarget(t, srv.URL, nil, 1), p, o)

	g.Expect(r.Requests).To(Equal(uint64(40)))
	g.Expect(r.Late).To(BeNumerically(">=", 38))
	// The last request is due at 195ms and answered no sooner than
	// 40*20 = 800ms; the 20th, due at 95ms, no sooner than 400ms.
	g.Expect(r.LatencyUS.Max).To(BeNumerically(">=", 600_000))
	g.Expect(r.LatencyUS.P50).To(BeNumerically(">=", 300_000))
}

func TestClosedLoopCountsStatusCodesPerTenant(t *testing.T) {
	g := NewWithT(t)
	var denied, tenant7 atomic.Int64
	srv, _ := upstreamServer(t, 0, func(r *http.Request) int {
		switch r.Header.Get("X-Tenant-ID") {
		case "t1", "t3":
			denied.Add(1)
			return http.StatusTooManyRequests
		case "t2":
			return http.StatusServiceUnavailable
		case "":
			return http.StatusBadRequest
		case "t7":
			tenant7.Add(1)
		}
		return http.StatusOK
	})
	p := plan{Concurrency: 4, Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond, Timeout: time.Second}
	tg := mustTarget(t, srv.URL, []string{"X-Tenant-ID: t{tenant}"}, 4)
	o := run(context.Background(), tg, p)
	r := newReport(tg, p, o)

	g.Expect(tenant7.Load()).To(BeZero())
	g.Expect(r.Requests).To(BeNumerically(">", 100))
	g.Expect(r.Errors).To(BeZero())
	g.Expect(r.Status.Other).To(BeZero())
	// Tenants take turns: half are denied, a quarter unavailable.
	g.Expect(float64(r.Status.TooManyRequests) / float64(r.Requests)).To(BeNumerically("~", 0.5, 0.02))
	g.Expect(float64(r.Status.Unavailable) / float64(r.Requests)).To(BeNumerically("~", 0.25, 0.02))
	g.Expect(r.Status.OK + r.Status.TooManyRequests + r.Status.Unavailable).To(Equal(r.Requests))
	g.Expect(r.Codes).To(HaveKeyWithValue("429", r.Status.TooManyRequests))
	g.Expect(r.Seconds).To(SatisfyAll(BeNumerically(">=", 0.29), BeNumerically("<", 3)))
	g.Expect(r.LatencyUS.P50).To(BeNumerically(">", 0))
	g.Expect(r.LatencyUS.P50).To(BeNumerically("<=", r.LatencyUS.P99))
	g.Expect(r.LatencyUS.P99).To(BeNumerically("<=", r.LatencyUS.Max))
}

func TestClosedLoopStopsAtMaxRequests(t *testing.T) {
	g := NewWithT(t)
	srv, _ := upstreamServer(t, 0, ok)
	p := plan{Concurrency: 8, Duration: 10 * time.Second, MaxRequests: 500, Timeout: time.Second}
	begin := time.Now()
	o := run(context.Background(), mustTarget(t, srv.URL, nil, 1), p)
	g.Expect(o.latency.Count()).To(Equal(uint64(500)))
	g.Expect(time.Since(begin)).To(BeNumerically("<", 5*time.Second))
}

func TestRunStopsWhenCancelled(t *testing.T) {
	g := NewWithT(t)
	srv, _ := upstreamServer(t, 0, ok)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	for _, rate := range []float64{0, 100} {
		run(ctx, mustTarget(t, srv.URL, nil, 1), plan{Rate: rate, Concurrency: 4, Duration: time.Minute, Timeout: time.Second})
	}
	g.Expect(time.Since(begin)).To(BeNumerically("<", 2*time.Second))
}

func TestRefusedConnectionsAreErrorsNotAnswers(t *testing.T) {
	g := NewWithT(t)
	srv, _ := upstreamServer(t, 0, ok)
	url := srv.URL
	srv.Close()
	p := plan{Concurrency: 2, Duration: 100 * time.Millisecond, Timeout: time.Second}
	tg := mustTarget(t, url, nil, 1)
	r := newReport(tg, p, run(context.Background(), tg, p))
	g.Expect(r.Requests).To(BeZero())
	g.Expect(r.Errors).To(BeNumerically(">", 0))
	// The pause after an error keeps a refused connection from spinning.
	g.Expect(r.Errors).To(BeNumerically("<", 50))
	g.Expect(r.LastError).To(ContainSubstring("refused"))
}
