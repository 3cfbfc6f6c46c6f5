package limiter

import (
	"github.com/sluice-dev/sluice/enforcer/config"

	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// localEpoch is a fake clock's start: a multiple of every period the tests
// use, so fixed windows start at offset 0.
var localEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// localClock is a fake clock, safe for concurrent use.
type localClock struct{ at atomic.Int64 } // µs since localEpoch

func (c *localClock) now() time.Time         { return localEpoch.Add(c.elapsed()) }
func (c *localClock) elapsed() time.Duration { return time.Duration(c.at.Load()) * time.Microsecond }
func (c *localClock) set(d time.Duration)    { c.at.Store(d.Microseconds()) }

func localBucket(tenant string) Bucket {
	return Bucket{Namespace: "shop", Policy: "public-api", Rule: "api", Tenant: HashTenant("salt", tenant)}
}

// localStep is one check at offset at of the clock and what its first window
// must answer; resetIn is Reset minus the check's time.
type localStep struct {
	at        time.Duration
	cost      int64
	allowed   bool
	remaining int64
	resetIn   time.Duration
	retry     time.Duration
}

func runLocalSteps(t *testing.T, a Algorithm, windows []Window, steps []localStep) {
	t.Helper()
	g := NewWithT(t)
	clock := &localClock{}
	l := NewLocal(clock.now)
	for i, s := range steps {
		clock.set(s.at)
		req := Request{Bucket: localBucket(t.Name()), Algorithm: a, Windows: windows, Cost: s.cost}
		allowed, now, results := l.Check(&req)
		g.Expect(now).To(BeTemporally("==", clock.now()))
		r := results[0]
		g.Expect([]any{allowed, r.Remaining, r.Reset.Sub(now), r.Retry}).To(
			Equal([]any{s.allowed, s.remaining, s.resetIn, s.retry}),
			"step %d at %s cost %d: [allowed remaining resetIn retry]", i, s.at, s.cost)
	}
}

func TestLocalTokenBucket(t *testing.T) {
	const ms = time.Millisecond
	// 60/min is one token per second; burst 10.
	steps := []localStep{
		{at: 0, cost: 0, allowed: true, remaining: 10, resetIn: 0},
		{at: 0, cost: 1, allowed: true, remaining: 9, resetIn: 1 * time.Second},
		{at: 0, cost: 1, allowed: true, remaining: 8, resetIn: 2 * time.Second},
		{at: 0, cost: 1, allowed: true, remaining: 7, resetIn: 3 * time.Second},
		{at: 0, cost: 1, allowed: true, remaining: 6, resetIn: 4 * time.Second},
		{at: 0, cost: 1, allowed: true, remaining: 5, resetIn: 5 * time.Second},
		{at: 0, cost: 1, allowed: true, remaining: 4, resetIn: 6 * time.Second},
		{at: 0, cost: 1, allowed: true, remaining: 3, resetIn: 7 * time.Second},
		{at: 0, cost: 1, allowed: true, remaining: 2, resetIn: 8 * time.Second},
		{at: 0, cost: 1, allowed: true, remaining: 1, resetIn: 9 * time.Second},
		{at: 0, cost: 1, allowed: true, remaining: 0, resetIn: 10 * time.Second},
		// the 11th waits exactly one token
		{at: 0, cost: 1, allowed: false, remaining: 0, resetIn: 10 * time.Second, retry: time.Second},
		// half a token is still not one
		{at: 500 * ms, cost: 1, allowed: false, remaining: 0, resetIn: 9500 * ms, retry: 500 * ms},
		{at: 1000 * ms, cost: 1, allowed: true, remaining: 0, resetIn: 10 * time.Second},
		// fractional refill: a quarter token after 250ms
		{at: 1250 * ms, cost: 1, allowed: false, remaining: 0, resetIn: 9750 * ms, retry: 750 * ms},
		// cost 3 with 1.5 tokens waits for the other 1.5
		{at: 2500 * ms, cost: 3, allowed: false, remaining: 1, resetIn: 8500 * ms, retry: 1500 * ms},
		{at: 4000 * ms, cost: 3, allowed: true, remaining: 0, resetIn: 10 * time.Second},
		// refills never exceed the burst
		{at: time.Hour, cost: 0, allowed: true, remaining: 10, resetIn: 0},
	}
	runLocalSteps(t, TokenBucket, []Window{{Requests: 60, Period: time.Minute, Burst: 10}}, steps)
}

func TestLocalFixedWindow(t *testing.T) {
	const ms = time.Millisecond
	steps := []localStep{
		{at: 400 * ms, cost: 0, allowed: true, remaining: 3, resetIn: 0},
		{at: 400 * ms, cost: 1, allowed: true, remaining: 2, resetIn: 600 * ms},
		{at: 500 * ms, cost: 1, allowed: true, remaining: 1, resetIn: 500 * ms},
		{at: 600 * ms, cost: 1, allowed: true, remaining: 0, resetIn: 400 * ms},
		{at: 700 * ms, cost: 1, allowed: false, remaining: 0, resetIn: 300 * ms, retry: 300 * ms},
		{at: time.Second - time.Microsecond, cost: 1, allowed: false, remaining: 0, resetIn: time.Microsecond, retry: time.Microsecond},
		// the aligned boundary starts a new window
		{at: time.Second, cost: 1, allowed: true, remaining: 2, resetIn: time.Second},
		{at: 1500 * ms, cost: 3, allowed: false, remaining: 2, resetIn: 500 * ms, retry: 500 * ms},
		{at: 1500 * ms, cost: 2, allowed: true, remaining: 0, resetIn: 500 * ms},
	}
	runLocalSteps(t, FixedWindow, []Window{{Requests: 3, Period: time.Second}}, steps)
}

func TestLocalSlidingWindowCounter(t *testing.T) {
	const s = time.Second
	steps := []localStep{
		{at: 0, cost: 10, allowed: true, remaining: 0, resetIn: 120 * s},
		// the current count exceeds what may be left: wait into the next
		// window until its weight 10*w <= 9, w = 0.9 at 66s
		{at: 30 * s, cost: 1, allowed: false, remaining: 0, resetIn: 90 * s, retry: 36 * s},
		{at: 60 * s, cost: 1, allowed: false, remaining: 0, resetIn: 60 * s, retry: 6 * s},
		{at: 66 * s, cost: 1, allowed: true, remaining: 0, resetIn: 114 * s},
		// mid-window: 10 weighted by half plus 1 is 6
		{at: 90 * s, cost: 0, allowed: true, remaining: 4, resetIn: 90 * s},
		// 6 + 5 > 10 until 10*w + 1 <= 5, w = 0.4 at 96s
		{at: 90 * s, cost: 5, allowed: false, remaining: 4, resetIn: 90 * s, retry: 6 * s},
		{at: 96 * s, cost: 5, allowed: true, remaining: 0, resetIn: 84 * s},
		// two windows later nothing weighs any more
		{at: 180 * s, cost: 0, allowed: true, remaining: 10, resetIn: 0},
	}
	runLocalSteps(t, SlidingWindowCounter, []Window{{Requests: 10, Period: time.Minute}}, steps)
}

func TestLocalSlidingWindowLog(t *testing.T) {
	const ms = time.Millisecond
	t.Run("retry waits for the k-th oldest entry", func(t *testing.T) {
		steps := []localStep{
			{at: 0, cost: 1, allowed: true, remaining: 2, resetIn: time.Second},
			{at: 100 * ms, cost: 1, allowed: true, remaining: 1, resetIn: time.Second},
			{at: 200 * ms, cost: 1, allowed: true, remaining: 0, resetIn: time.Second},
			{at: 300 * ms, cost: 1, allowed: false, remaining: 0, resetIn: 900 * ms, retry: 700 * ms},
			{at: time.Second - time.Microsecond, cost: 1, allowed: false, remaining: 0, resetIn: 200*ms + time.Microsecond, retry: time.Microsecond},
			// the entry at 0 leaves at 1s exactly: the window is (now-1s, now]
			{at: time.Second, cost: 1, allowed: true, remaining: 0, resetIn: time.Second},
			// cost 2 needs the 2 oldest (100ms, 200ms) gone: the second leaves at 1.2s
			{at: 1050 * ms, cost: 2, allowed: false, remaining: 0, resetIn: 950 * ms, retry: 150 * ms},
			{at: 1200 * ms, cost: 2, allowed: true, remaining: 0, resetIn: time.Second},
		}
		runLocalSteps(t, SlidingWindowLog, []Window{{Requests: 3, Period: time.Second}}, steps)
	})
	t.Run("requests within one microsecond are each counted", func(t *testing.T) {
		steps := []localStep{
			{at: ms, cost: 1, allowed: true, remaining: 4, resetIn: time.Second},
			{at: ms, cost: 1, allowed: true, remaining: 3, resetIn: time.Second},
			{at: ms, cost: 2, allowed: true, remaining: 1, resetIn: time.Second},
			{at: ms, cost: 1, allowed: true, remaining: 0, resetIn: time.Second},
			{at: ms, cost: 1, allowed: false, remaining: 0, resetIn: time.Second, retry: time.Second},
			{at: ms + time.Second, cost: 0, allowed: true, remaining: 5, resetIn: 0},
		}
		runLocalSteps(t, SlidingWindowLog, []Window{{Requests: 5, Period: time.Second}}, steps)
	})
}

func TestLocalMultiWindowRefusalConsumesNothing(t *testing.T) {
	for _, a := range config.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			g := NewWithT(t)
			clock := &localClock{}
			l := NewLocal(clock.now)
			check := func(cost int64) (bool, []WindowResult) {
				req := Request{Bucket: localBucket(t.Name()), Algorithm: a, Cost: cost,
					Windows: []Window{{Requests: 2, Period: time.Second}, {Requests: 10, Period: time.Minute}}}
				allowed, _, results := l.Check(&req)
				return allowed, results
			}
			for range 2 {
				allowed, _ := check(1)
				g.Expect(allowed).To(BeTrue())
			}
			for range 3 {
				allowed, results := check(1)
				g.Expect(allowed).To(BeFalse())
				g.Expect(results[0].Retry).To(BeNumerically(">", 0), "the short window refuses")
				g.Expect(results[1].Retry).To(BeZero(), "the long window would admit")
				g.Expect(results[1].Remaining).To(Equal(int64(8)))
			}
			_, results := check(0)
			g.Expect(results[0].Remaining).To(Equal(int64(0)))
			g.Expect(results[1].Remaining).To(Equal(int64(8)), "refusals took nothing from the long window")
		})
	}
}

func TestLocalSweepDropsExpiredState(t *testing.T) {
	g := NewWithT(t)
	clock := &localClock{}
	l := NewLocal(clock.now)
	check := func(a Algorithm, w Window, cost int64) {
		req := Request{Bucket: localBucket(t.Name()), Algorithm: a, Cost: cost, Windows: []Window{w}}
		l.Check(&req)
	}
	check(FixedWindow, Window{Requests: 5, Period: time.Second}, 1)                     // expires at 1s, the window's end
	check(FixedWindow, Window{Requests: 5, Period: time.Minute}, 1)                     // at 1min
	check(TokenBucket, Window{Requests: 60, Period: time.Minute, Burst: 10}, 1)         // at 1s, full again
	check(SlidingWindowCounter, Window{Requests: 5, Period: 500 * time.Millisecond}, 1) // at 1s, two windows
	clock.set(500 * time.Millisecond)
	check(SlidingWindowLog, Window{Requests: 5, Period: time.Second}, 1) // at 1.5s
	check(SlidingWindowLog, Window{Requests: 5, Period: time.Hour}, 0)   // a read keeps nothing
	g.Expect(l.Len()).To(Equal(5))

	for _, s := range []struct {
		at  time.Duration
		len int
	}{
		{at: time.Second - time.Microsecond, len: 5},
		{at: time.Second, len: 2},
		{at: 1500 * time.Millisecond, len: 1},
		{at: time.Minute, len: 0},
	} {
		clock.set(s.at)
		l.Sweep()
		g.Expect(l.Len()).To(Equal(s.len), "after sweeping at %s", s.at)
	}

	// expired state met by a request is dropped without waiting for Sweep
	check(FixedWindow, Window{Requests: 5, Period: time.Second}, 1)
	g.Expect(l.Len()).To(Equal(1))
	clock.set(time.Minute + time.Second)
	check(FixedWindow, Window{Requests: 5, Period: time.Second}, 0)
	g.Expect(l.Len()).To(BeZero())
}

func TestLocalMaxEntries(t *testing.T) {
	g := NewWithT(t)
	clock := &localClock{}
	l := NewLocal(clock.now, LocalMaxEntries(2))
	check := func(tenant string) bool {
		req := Request{Bucket: localBucket(tenant), Algorithm: FixedWindow, Cost: 1,
			Windows: []Window{{Requests: 1, Period: time.Minute}}}
		allowed, _, _ := l.Check(&req)
		return allowed
	}
	g.Expect(check("a")).To(BeTrue())
	g.Expect(check("b")).To(BeTrue())
	g.Expect(check("a")).To(BeFalse(), "tracked tenants stay limited")

	// full: a new tenant is answered as fresh and not remembered
	g.Expect(check("c")).To(BeTrue())
	g.Expect(check("c")).To(BeTrue())
	g.Expect(l.Len()).To(Equal(2))

	// once state expires it makes room, without waiting for Sweep
	clock.set(time.Minute)
	g.Expect(check("c")).To(BeTrue())
	g.Expect(check("c")).To(BeFalse(), "c is tracked now")
	g.Expect(l.Len()).To(BeNumerically("<=", 2))
}

func TestLocalMaxEntriesKeepsRenewedState(t *testing.T) {
	g := NewWithT(t)
	clock := &localClock{}
	l := NewLocal(clock.now, LocalMaxEntries(2))
	check := func(tenant string, windows ...Window) bool {
		req := Request{Bucket: localBucket(tenant), Algorithm: FixedWindow, Cost: 1, Windows: windows}
		allowed, _, _ := l.Check(&req)
		return allowed
	}
	second, minute := Window{Requests: 1, Period: time.Second}, Window{Requests: 1, Period: time.Minute}
	g.Expect(check("a", second)).To(BeTrue())
	g.Expect(check("b", minute)).To(BeTrue())

	// full; a's 1s state has expired and is renewed by the same request
	// that needs room for new 1min state: making room must not drop it
	clock.set(time.Second)
	g.Expect(check("a", minute, second)).To(BeTrue())
	g.Expect(check("a", second)).To(BeFalse(), "the renewed 1s window is still counted")
	g.Expect(l.Len()).To(Equal(2))
}

func TestLocalConcurrentUseAdmitsExactlyTheLimit(t *testing.T) {
	const limit, goroutines, attempts, tenants = 100, 16, 50, 4
	for _, a := range config.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			g := NewWithT(t)
			clock := &localClock{} // frozen: nothing refills during the run
			l := NewLocal(clock.now)
			var admitted [tenants]atomic.Int64
			var wg sync.WaitGroup
			for i := range goroutines {
				wg.Go(func() {
					for j := range attempts {
						tenant := (i + j) % tenants
						req := Request{Bucket: localBucket(strconv.Itoa(tenant)), Algorithm: a, Cost: 1,
							Windows: []Window{{Requests: limit, Period: time.Minute}}}
						if allowed, _, _ := l.Check(&req); allowed {
							admitted[tenant].Add(1)
						}
						if j%10 == 0 {
							l.Sweep()
						}
					}
				})
			}
			wg.Wait()
			for i := range admitted {
				g.Expect(admitted[i].Load()).To(Equal(int64(limit)), "tenant %d", i)
			}
			g.Expect(l.Len()).To(Equal(tenants))
		})
	}
}

// TestLocalRetryAndResetHold checks, over random traffic, what a client
// relies on: the request is admitted once Retry has passed, not a
// microsecond before for the integer algorithms, and at Reset the window is
// whole again.
func TestLocalRetryAndResetHold(t *testing.T) {
	for _, a := range config.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			g := NewWithT(t)
			rng := rand.New(rand.NewPCG(1, uint64(len(a))))
			clock := &localClock{}
			l := NewLocal(clock.now)
			w := Window{Requests: 20, Period: 10 * time.Second, Burst: 25}
			capacity := w.capacity(a)
			check := func(cost int64) (bool, WindowResult) {
				req := Request{Bucket: localBucket(t.Name()), Algorithm: a, Cost: cost, Windows: []Window{w}}
				allowed, _, results := l.Check(&req)
				return allowed, results[0]
			}
			exact := a == FixedWindow || a == SlidingWindowLog || a == GCRA
			for i := range 3000 {
				clock.set(clock.elapsed() + time.Duration(rng.Int64N(int64(w.Period/8))).Truncate(time.Microsecond))
				cost := 1 + rng.Int64N(min(capacity, 4))
				allowed, r := check(cost)
				g.Expect(r.Remaining).To(BeNumerically(">=", 0))
				g.Expect(r.Reset).To(BeTemporally(">=", clock.now()))
				if allowed {
					g.Expect(r.Retry).To(BeZero())
				} else {
					g.Expect(r.Remaining).To(BeNumerically("<", cost))
					g.Expect(r.Retry).To(BeNumerically(">", 0))
					at := clock.elapsed()
					if exact {
						clock.set(at + r.Retry - time.Microsecond)
						ok, _ := check(cost)
						g.Expect(ok).To(BeFalse(), "step %d: admitted a microsecond before retry %s", i, r.Retry)
					}
					clock.set(at + r.Retry)
					ok, _ := check(cost)
					g.Expect(ok).To(BeTrue(), "step %d: refused after retry %s", i, r.Retry)
				}
				if i%100 == 99 {
					_, r := check(0)
					clock.set(r.Reset.Sub(localEpoch))
					_, r = check(0)
					g.Expect(r.Remaining).To(Equal(capacity), "step %d: not whole at reset", i)
				}
			}
		})
	}
}

// TestLocalMatchesRedisScripts replays random traffic through the Lua
// scripts on a real Redis and through Local at the same microseconds (Redis'
// TIME): every decision and every window's remaining, reset and retry must be
// identical, so a fallback decision reads like one Redis made. The scripts
// are called with their descriptors' arguments, independently of the Redis
// limiter: a rule of two windows by the general script, one of one window
// by the single-window script.
func TestLocalMatchesRedisScripts(t *testing.T) {
	client := redistest.Start(t).Client()
	two := []Window{{Requests: 7, Period: 30 * time.Millisecond, Burst: 9}, {Requests: 13, Period: 110 * time.Millisecond}}
	for _, tc := range []struct {
		name    string
		windows []Window
	}{{"general", two}, {"single", two[:1]}} {
		for _, a := range config.Algorithms {
			t.Run(tc.name+"/"+string(a), func(t *testing.T) { testLocalMatchesRedisScript(t, client, a, tc.windows) })
		}
	}
}

func testLocalMatchesRedisScript(t *testing.T, client *redis.Client, a Algorithm, windows []Window) {
	g := NewWithT(t)
	rng := rand.New(rand.NewPCG(2, uint64(len(a))))
	clock := &localClock{}
	l := NewLocal(clock.now)
	req := Request{Algorithm: a, Windows: windows,
		Bucket: localBucket(fmt.Sprint(t.Name(), time.Now().UnixNano()))}
	refused := 0
	for i := range 1000 {
		req.Cost = rng.Int64N(4) // 0 reads
		want := runLocalScript(t, client, &req)
		clock.set(time.UnixMicro(want[1]).Sub(localEpoch))
		allowed, now, results := l.Check(&req)
		got := []int64{0, now.UnixMicro()}
		if allowed {
			got[0] = 1
		}
		for _, r := range results {
			got = append(got, r.Remaining, r.Reset.UnixMicro(), r.Retry.Microseconds())
		}
		g.Expect(got).To(Equal(want), "call %d cost %d: {allowed, now, then remaining, reset, retry per window}", i, req.Cost)
		if !allowed {
			refused++
		}
		if rng.IntN(8) == 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(15 * time.Millisecond))))
		}
	}
	g.Expect(refused).To(BeNumerically(">", 100), "the traffic reached the limits")
}

// runLocalScript runs req's algorithm script (for one window, its
// single-window script) without asking for a lease and
// returns its reply, without the taken units of the algorithms that lease:
// those must be the cost when allowed, 0 when refused.
func runLocalScript(t *testing.T, client *redis.Client, req *Request) []int64 {
	t.Helper()
	d := descriptorOf(req.Algorithm)
	keys, args := []string{}, []any{req.Cost}
	for _, w := range req.Windows {
		keys = append(keys, req.Bucket.Key(req.Algorithm, w.Period))
		args = d.args(args, w)
	}
	src := d.script.src
	if len(req.Windows) == 1 {
		src = d.single.src
	}
	cmd := redis.NewScript(src).Run(context.Background(), client, keys, args...)
	if cmd.Err() != nil {
		t.Fatal(cmd.Err())
	}
	reply, err := cmd.Int64Slice()
	if _, short := cmd.Val().(string); short {
		reply = replyTable(t, cmd.Val(), req, req.Cost)
	} else if err != nil {
		t.Fatal(err)
	}
	if d.leases {
		taken := reply[len(reply)-1]
		reply = reply[:len(reply)-1]
		if want := reply[0] * req.Cost; taken != want {
			t.Fatalf("allowed %d at cost %d took %d, want %d", reply[0], req.Cost, taken, want)
		}
	}
	return reply
}

// BenchmarkLocal measures one decision of an existing key: a limit the
// traffic never reaches, the clock advancing 1µs per decision.
func BenchmarkLocal(b *testing.B) {
	w := []Window{{Requests: 1 << 21, Period: time.Second}}
	for _, a := range config.Algorithms {
		b.Run(string(a), func(b *testing.B) {
			var at time.Time
			l := NewLocal(func() time.Time { return at })
			at = localEpoch
			req := Request{Bucket: localBucket("bench"), Algorithm: a, Cost: 1, Windows: w}
			b.ReportAllocs()
			for b.Loop() {
				at = at.Add(time.Microsecond)
				if allowed, _, _ := l.Check(&req); !allowed {
					b.Fatal("refused")
				}
			}
		})
	}
}

// BenchmarkLocalParallel measures decisions from GOMAXPROCS goroutines,
// each its own tenant.
func BenchmarkLocalParallel(b *testing.B) {
	w := []Window{{Requests: 1 << 21, Period: time.Second}}
	for _, a := range config.Algorithms {
		b.Run(string(a), func(b *testing.B) {
			clock := &localClock{}
			l := NewLocal(clock.now)
			var tenants atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := Request{Bucket: localBucket(fmt.Sprint(tenants.Add(1))), Algorithm: a, Cost: 1, Windows: w}
				for pb.Next() {
					clock.at.Add(1)
					l.Check(&req)
				}
			})
		})
	}
}

// TestEveryAlgorithmHasADescriptor: an algorithm the configuration accepts
// is one the limiter can decide, with a script, its arguments and its
// in-process twin.
func TestEveryAlgorithmHasADescriptor(t *testing.T) {
	g := NewWithT(t)
	g.Expect(algorithms).To(HaveLen(len(config.Algorithms)))
	for _, a := range config.Algorithms {
		d := descriptorOf(a)
		g.Expect(d).NotTo(BeNil(), string(a))
		g.Expect(d.code).NotTo(BeEmpty(), string(a))
		g.Expect(d.args).NotTo(BeNil(), string(a))
		g.Expect(d.read).NotTo(BeNil(), string(a))
		g.Expect(d.answer).NotTo(BeNil(), string(a))
	}
}
