package limiter

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
)

func TestScaleWindows(t *testing.T) {
	for _, c := range []struct {
		name    string
		alg     Algorithm
		in      []Window
		cost    int64
		factor  config.BasisPoints
		want    []Window
		samePtr bool
	}{
		{"full keeps the windows", config.TokenBucket, []Window{{Requests: 100, Period: time.Second}}, 1, config.Full,
			[]Window{{Requests: 100, Period: time.Second}}, true},
		{"rounded down", config.TokenBucket, []Window{{Requests: 100, Period: time.Second, Burst: 15}}, 1, 3333,
			[]Window{{Requests: 33, Period: time.Second, Burst: 4}}, false},
		{"at least one", config.SlidingWindowLog, []Window{{Requests: 3, Period: time.Minute}, {Requests: 1000, Period: time.Hour}}, 1, 2500,
			[]Window{{Requests: 1, Period: time.Minute}, {Requests: 250, Period: time.Hour}}, false},
		{"at least the cost where it is the capacity", config.GCRA, []Window{{Requests: 100, Period: time.Second, Burst: 10}}, 5, 2500,
			[]Window{{Requests: 25, Period: time.Second, Burst: 5}}, false},
		{"the cost without a burst", config.FixedWindow, []Window{{Requests: 10, Period: time.Second}}, 5, 2500,
			[]Window{{Requests: 5, Period: time.Second}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			got := ScaleWindows(c.alg, c.in, c.cost, c.factor)
			g.Expect(got).To(Equal(c.want))
			if c.samePtr {
				g.Expect(&got[0]).To(BeIdenticalTo(&c.in[0]), "no copy at 100%")
			} else {
				g.Expect(&got[0]).NotTo(BeIdenticalTo(&c.in[0]), "the configured windows stay as they are")
			}
			g.Expect(validateWindows(c.alg, got, c.cost)).To(Succeed(), "every scaled rule can be decided")
		})
	}
}

func TestMeterCountsResponses(t *testing.T) {
	g := NewWithT(t)
	m := NewMeter(&config.Adaptive{Latency: config.Duration{Duration: 100 * time.Millisecond}})
	m.Observe(10*time.Millisecond, 200)
	m.Observe(90*time.Millisecond, 503) // over the healthy margin (80 ms), under the target
	m.Observe(150*time.Millisecond, 404)
	m.Observe(2*time.Minute, 500) // past the last bucket
	c := m.Take()
	g.Expect(c.Total).To(Equal(int64(4)))
	g.Expect(c.Errors).To(Equal(int64(2)))
	g.Expect(c.Slow).To(Equal(int64(2)))
	g.Expect(c.Warm).To(Equal(int64(3)))
	g.Expect(c.Histogram[3]).To(Equal(int64(1)), "10ms")
	g.Expect(c.Histogram[6]).To(Equal(int64(1)), "90ms in the 100ms bucket")
	g.Expect(c.Histogram[7]).To(Equal(int64(1)), "150ms in the 250ms bucket")
	g.Expect(c.Histogram[len(LatencyBuckets)]).To(Equal(int64(1)), "beyond the last bound")
	g.Expect(m.Take()).To(Equal(MeterCounts{}), "taken: counting starts again")
	m.Restore(c)
	g.Expect(m.Take()).To(Equal(c))
}

// adaptiveRun drives one rule's shared factor as replicas would.
type adaptiveRun struct {
	t      *testing.T
	r      *Redis
	bucket Bucket
	a      *config.Adaptive
}

// interval records c into the current interval, waits for the next one and
// returns what the first call there decided.
func (ar adaptiveRun) interval(c MeterCounts) AdaptiveState {
	ar.t.Helper()
	ctx := context.Background()
	s, err := ar.r.AdaptiveStep(ctx, ar.bucket, ar.a, c)
	if err != nil {
		ar.t.Fatal(err)
	}
	for {
		time.Sleep(50 * time.Millisecond)
		next, err := ar.r.AdaptiveStep(ctx, ar.bucket, ar.a, MeterCounts{})
		if err != nil {
			ar.t.Fatal(err)
		}
		if next.Now > s.Now {
			if next.Now != s.Now+1 {
				ar.t.Fatalf("the machine skipped an interval (%d -> %d)", s.Now, next.Now)
			}
			return next
		}
	}
}

func adaptiveCounts(total, errors, slow, warm int64) MeterCounts {
	c := MeterCounts{Total: total, Errors: errors, Slow: slow, Warm: warm}
	c.Histogram[0] = total - warm
	c.Histogram[8] = warm
	return c
}

func TestAdaptiveStepSharedFactor(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			r := newRedis(t, url)
			b := bucketFor(t)
			b.Rule = strings.ToLower(name) + "-" + time.Now().Format("150405.000")
			a := &config.Adaptive{Latency: config.Duration{Duration: 100 * time.Millisecond}, ErrorRate: 500, Minimum: 5000,
				Interval: config.Duration{Duration: time.Second}}
			run := adaptiveRun{t: t, r: r, bucket: b, a: a}

			s := run.interval(adaptiveCounts(20, 0, 3, 3)) // 15% slower than the target: over
			g.Expect(s.Factor).To(Equal(config.BasisPoints(7000)))
			g.Expect(s.Step).To(Equal(-1))
			g.Expect(s.Responses).To(Equal(int64(20)))
			g.Expect(s.P90).To(Equal(500*time.Millisecond), "the 3 slowest of 20 are in the 500ms bucket")
			// another replica in the same interval: the step is taken once
			again, err := r.AdaptiveStep(context.Background(), b, a, MeterCounts{})
			g.Expect(err).NotTo(HaveOccurred())
			if again.Now == s.Now {
				g.Expect(again.Factor).To(Equal(config.BasisPoints(7000)))
				g.Expect(again.Interval).To(Equal(s.Interval))
			}

			s = run.interval(adaptiveCounts(20, 2, 0, 0)) // 10% errors, over 5%
			g.Expect(s.Factor).To(Equal(config.BasisPoints(5000)), "x0.7 is 49%, clamped to the minimum")
			g.Expect(s.ErrorRate()).To(BeNumerically("~", 0.1))

			s = run.interval(adaptiveCounts(20, 0, 0, 3)) // slower than 80% of the target: within the margin
			g.Expect(s.Step).To(Equal(2))
			g.Expect(s.Factor).To(Equal(config.BasisPoints(5000)), "held")

			s = run.interval(adaptiveCounts(5, 5, 5, 5)) // too few responses to judge
			g.Expect(s.Step).To(Equal(2))
			g.Expect(s.Factor).To(Equal(config.BasisPoints(5000)))

			s = run.interval(adaptiveCounts(40, 1, 0, 2)) // 2.5% errors, 5% over the margin: healthy
			g.Expect(s.Step).To(Equal(1))
			g.Expect(s.Factor).To(Equal(config.BasisPoints(6000)), "+10 points")
		})
	}
}

// A new interval length keeps the factor and goes on stepping: intervals
// are numbered anew, and none of the old numbering blocks a decision.
func TestAdaptiveStepAfterTheIntervalChanges(t *testing.T) {
	g := NewWithT(t)
	r := newRedis(t, standalone.URL())
	b := bucketFor(t)
	b.Rule = "interval-" + time.Now().Format("150405.000")
	a := &config.Adaptive{ErrorRate: 500, Minimum: 2500, Interval: config.Duration{Duration: time.Second}}
	run := adaptiveRun{t: t, r: r, bucket: b, a: a}
	g.Expect(run.interval(adaptiveCounts(20, 10, 0, 0)).Factor).To(Equal(config.BasisPoints(7000)))

	// a longer interval: its numbers are smaller than the one decided
	a.Interval = config.Duration{Duration: 2 * time.Second}
	s := run.interval(adaptiveCounts(20, 10, 0, 0))
	if s.Step == 2 { // the first call in the new numbering found nothing measured before it
		s = run.interval(adaptiveCounts(20, 10, 0, 0))
	}
	g.Expect(s.Factor).To(Equal(config.BasisPoints(4900)), "the factor stayed and stepped again")
}
