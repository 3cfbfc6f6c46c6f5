package limiter

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// hammer runs 8 goroutines on each of two limiters (two clients, as two
// enforcer sidecars would be) against one bucket for about d, and returns the
// Redis times of the admitted requests, sorted.
func hammer(t *testing.T, url string, req Request, d time.Duration) []time.Time {
	t.Helper()
	limiters := []*Redis{newRedis(t, url), newRedis(t, url)}
	var (
		mu       sync.Mutex
		admitted []time.Time
		wg       sync.WaitGroup
		errs     = make(chan error, 16)
	)
	deadline := time.Now().Add(d)
	for _, r := range limiters {
		for range 8 {
			wg.Go(func() {
				for i := 0; i < 5000 && time.Now().Before(deadline); i++ {
					dec, err := r.Allow(context.Background(), req)
					if err != nil {
						errs <- err
						return
					}
					if dec.Allowed {
						mu.Lock()
						admitted = append(admitted, dec.Now)
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.SortFunc(admitted, func(a, b time.Time) int { return a.Compare(b) })
	return admitted
}

func TestConcurrentSlidingWindowLogNeverExceedsLimit(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			const limit, period = 20, 300 * time.Millisecond
			req := Request{Bucket: bucketFor(t), Algorithm: SlidingWindowLog, Cost: 1,
				Windows: []Window{{Requests: limit, Period: period}}}
			admitted := hammer(t, url, req, time.Second)
			g.Expect(len(admitted)).To(BeNumerically(">=", 3*limit), "the limit was reached repeatedly")
			// Every window (t-period, t] ending at an admission holds at most limit.
			for i, at := range admitted {
				first, _ := slices.BinarySearchFunc(admitted, at.Add(-period), func(a, b time.Time) int {
					if !a.After(b) {
						return -1
					}
					return 1
				})
				g.Expect(i-first+1).To(BeNumerically("<=", limit), "window ending %s", at)
			}
		})
	}
}

func TestConcurrentTokenBucketStaysWithinCapacityPlusRefill(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			const burst, rate = 10, 100 // per second
			req := Request{Bucket: bucketFor(t), Algorithm: TokenBucket, Cost: 1,
				Windows: []Window{{Requests: rate, Period: time.Second, Burst: burst}}}
			admitted := hammer(t, url, req, time.Second)
			g.Expect(len(admitted)).To(BeNumerically(">", burst))
			elapsed := admitted[len(admitted)-1].Sub(admitted[0]).Seconds()
			g.Expect(float64(len(admitted))).To(BeNumerically("<=", burst+rate*elapsed+1))
			// and over every prefix of the run, not only the whole of it
			for i, at := range admitted {
				g.Expect(float64(i + 1)).To(BeNumerically("<=", burst+rate*at.Sub(admitted[0]).Seconds()+1))
			}
		})
	}
}

func TestConcurrentFixedWindowAdmitsAtMostLimitPerWindow(t *testing.T) {
	for name, url := range topologies() {
		for _, a := range []Algorithm{FixedWindow, SlidingWindowCounter} {
			t.Run(name+"/"+string(a), func(t *testing.T) {
				g := NewWithT(t)
				const limit, period = 15, 250 * time.Millisecond
				req := Request{Bucket: bucketFor(t), Algorithm: a, Cost: 1,
					Windows: []Window{{Requests: limit, Period: period}}}
				admitted := hammer(t, url, req, time.Second)
				perWindow := map[int64]int{}
				for _, at := range admitted {
					perWindow[at.UnixMicro()/period.Microseconds()]++
				}
				g.Expect(len(perWindow)).To(BeNumerically(">=", 3))
				for w, n := range perWindow {
					g.Expect(n).To(BeNumerically("<=", limit), "window %d", w)
				}
			})
		}
	}
}
