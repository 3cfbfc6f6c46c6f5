package main

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// plan is how load is sent. Rate 0 is the closed model: Concurrency
// connections each send a request as soon as the previous one is answered,
// which measures maximum throughput. Rate > 0 is the open model: requests
// are due at a fixed rate whatever the server does, spread over up to
// Concurrency connections, which measures latency at a given load.
type plan struct {
	Rate        float64
	Concurrency int
	Warmup      time.Duration
	Duration    time.Duration
	// MaxRequests caps the measured requests; 0 means no cap.
	MaxRequests uint64
	Timeout     time.Duration
}

// lateAfter is how far past its due time a request must start to count as
// late: no connection was free for it in time.
const lateAfter = time.Millisecond

// errorPause keeps a closed-loop worker whose requests fail (a refused
// connection) from spinning on the CPUs that the server needs.
const errorPause = 10 * time.Millisecond

// tally is what one worker saw during the measured part of a run.
type tally struct {
	latency  Histogram
	codes    [600]uint64
	errors   uint64
	late     uint64
	lastErr  error
	lastDone time.Time
}

func (t *tally) add(o *tally) {
	t.latency.Merge(&o.latency)
	for i, c := range o.codes {
		t.codes[i] += c
	}
	t.errors += o.errors
	t.late += o.late
	if o.lastErr != nil {
		t.lastErr = o.lastErr
	}
	if o.lastDone.After(t.lastDone) {
		t.lastDone = o.lastDone
	}
}

func (t *tally) record(status int, err error, origin, done time.Time) {
	if err != nil {
		t.errors++
		t.lastErr = err
		return
	}
	if status >= 100 && status < len(t.codes) {
		t.codes[status]++
	} else {
		t.codes[0]++
	}
	t.latency.Record(done.Sub(origin))
	t.lastDone = done
}

// outcome is the merged tally of a run and the measured period's bounds.
type outcome struct {
	tally
	measureFrom time.Time
}

// elapsed is the measured period: from the end of the warm-up to the last
// response.
func (o *outcome) elapsed(nominal time.Duration) time.Duration {
	if o.lastDone.IsZero() {
		return nominal
	}
	return max(o.lastDone.Sub(o.measureFrom), time.Millisecond)
}

// caller sends the requests of one connection (or, for gRPC, one caller
// of a shared connection), one at a time.
type caller interface {
	// call sends the i-th request of the run and returns its HTTP status
	// (gRPC statuses are reported as the HTTP status of the same refusal).
	call(i uint64) (status int, err error)
	close()
}

// run sends load to t as p says and stops by itself after the warm-up and
// the duration (or MaxRequests), or when ctx ends.
func run(ctx context.Context, t *target, p plan) *outcome {
	return runCallers(ctx, func() caller { return &httpCaller{c: newConn(t.addr, p.Timeout), t: t} }, p)
}

// runCallers runs the plan with p.Concurrency callers made by newCaller.
func runCallers(ctx context.Context, newCaller func() caller, p plan) *outcome {
	start := time.Now()
	o := &outcome{measureFrom: start.Add(p.Warmup)}
	tallies := make([]tally, p.Concurrency)
	var wg sync.WaitGroup
	var worker func(c caller, tl *tally)
	if p.Rate > 0 {
		s := newSchedule(start, p)
		worker = func(c caller, tl *tally) { s.work(ctx, c, tl) }
	} else {
		l := &loop{deadline: o.measureFrom.Add(p.Duration), measureFrom: o.measureFrom, max: p.MaxRequests}
		worker = func(c caller, tl *tally) { l.work(ctx, c, tl) }
	}
	for i := range tallies {
		wg.Go(func() {
			c := newCaller()
			defer c.close()
			worker(c, &tallies[i])
		})
	}
	wg.Wait()
	for i := range tallies {
		o.add(&tallies[i])
	}
	return o
}

// loop is the closed model's shared state.
type loop struct {
	deadline, measureFrom time.Time
	max                   uint64
	sent, measured        atomic.Uint64
}

func (l *loop) work(ctx context.Context, c caller, tl *tally) {
	for ctx.Err() == nil {
		begin := time.Now()
		if !begin.Before(l.deadline) {
			return
		}
		measure := !begin.Before(l.measureFrom)
		if measure && l.max > 0 && l.measured.Add(1) > l.max {
			return
		}
		status, err := c.call(l.sent.Add(1) - 1)
		if measure {
			tl.record(status, err, begin, time.Now())
		}
		if err != nil {
			sleep(ctx, errorPause)
		}
	}
}

// schedule is the open model's timetable: request i is due at
// start + i/rate, for as many requests as fit in the warm-up and duration.
type schedule struct {
	start     time.Time
	rate      float64
	warmupN   uint64 // requests due during the warm-up, not measured
	total     uint64
	next      atomic.Uint64
	lateAfter time.Duration
}

func newSchedule(start time.Time, p plan) *schedule {
	s := &schedule{start: start, rate: p.Rate, lateAfter: lateAfter}
	s.warmupN = plannedRequests(p.Rate, p.Warmup)
	s.total = s.warmupN + plannedRequests(p.Rate, p.Duration)
	if p.MaxRequests > 0 {
		s.total = min(s.total, s.warmupN+p.MaxRequests)
	}
	return s
}

// plannedRequests is how many requests are due in d at rate per second.
func plannedRequests(rate float64, d time.Duration) uint64 {
	return uint64(math.Floor(rate*d.Seconds() + 1e-9))
}

// due is when request i should be sent, as an offset from the start.
func due(rate float64, i uint64) time.Duration {
	return time.Duration(float64(i) * float64(time.Second) / rate)
}

// work sends the scheduled requests that this worker takes in turn.
//
// A request's latency counts from its due time when it starts late because
// every connection was busy (the server is behind, and a user would wait
// that long: no coordinated omission), and from its actual start when the
// worker was waiting for it (oversleeping by the timer is this tool's
// delay, not the server's).
func (s *schedule) work(ctx context.Context, c caller, tl *tally) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		i := s.next.Add(1) - 1
		if i >= s.total {
			return
		}
		dueAt := s.start.Add(due(s.rate, i))
		origin := dueAt
		if wait := time.Until(dueAt); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
			origin = time.Now()
		} else if -wait > s.lateAfter && i >= s.warmupN {
			tl.late++
		}
		status, err := c.call(i)
		if i >= s.warmupN {
			tl.record(status, err, origin, time.Now())
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
