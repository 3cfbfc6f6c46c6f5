package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestBucketsCoverEveryValueInOrder(t *testing.T) {
	g := NewWithT(t)
	values := []int64{0, 1, 255, 256, 257, 511, 512, 1000, 123_456, 1 << 40, math.MaxInt64}
	for i := int64(0); i < 70_000; i += 7 {
		values = append(values, i)
	}
	for _, v := range values {
		i := bucketIndex(v)
		g.Expect(i).To(BeNumerically("<", bucketCount), "value %d", v)
		lo, hi := bucketBounds(i)
		g.Expect(v).To(SatisfyAll(BeNumerically(">=", lo), BeNumerically("<=", hi)), "value %d in bucket %d", v, i)
		// The bucket is no wider than 1/128 of its values.
		g.Expect(float64(hi-lo)/float64(max(lo, 1))).To(BeNumerically("<", 1.0/subBuckets), "value %d", v)
	}
	// Buckets are contiguous: each starts right after the one before.
	for i := 1; i < bucketCount; i++ {
		_, prevHi := bucketBounds(i - 1)
		lo, _ := bucketBounds(i)
		g.Expect(lo).To(Equal(prevHi+1), "bucket %d", i)
	}
	_, last := bucketBounds(bucketCount - 1)
	g.Expect(last).To(Equal(int64(math.MaxInt64)))
}

func TestQuantilesOfSmallValuesAreExact(t *testing.T) {
	g := NewWithT(t)
	var h Histogram
	for v := 1; v <= 100; v++ {
		h.Record(time.Duration(v))
	}
	g.Expect(h.Count()).To(Equal(uint64(100)))
	g.Expect(h.Quantile(0.5)).To(Equal(time.Duration(50)))
	g.Expect(h.Quantile(0.99)).To(Equal(time.Duration(99)))
	g.Expect(h.Quantile(0.999)).To(Equal(time.Duration(100)))
	g.Expect(h.Quantile(0)).To(Equal(time.Duration(1)))
	g.Expect(h.Quantile(1)).To(Equal(time.Duration(100)))
	g.Expect(h.Mean()).To(Equal(time.Duration(50))) // 50.5 truncated
	g.Expect(h.Min()).To(Equal(time.Duration(1)))
	g.Expect(h.Max()).To(Equal(time.Duration(100)))
}

func TestQuantilesMatchSortedSamplesWithinOnePercent(t *testing.T) {
	g := NewWithT(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	samples := make([]int64, 0, 200_000)
	for range cap(samples) {
		// Log-normal latencies around 300µs with a long tail, like a proxy's.
		v := int64(300_000 * math.Exp(rng.NormFloat64()*0.8))
		samples = append(samples, v)
		h.Record(time.Duration(v))
	}
	slices.Sort(samples)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 0.9999} {
		want := samples[int(math.Ceil(q*float64(len(samples))))-1]
		got := int64(h.Quantile(q))
		// Never below the true value, and above it by at most a bucket.
		g.Expect(got).To(BeNumerically(">=", want), "q=%v", q)
		g.Expect(float64(got-want)/float64(want)).To(BeNumerically("<", 0.01), "q=%v", q)
	}
	g.Expect(int64(h.Max())).To(Equal(samples[len(samples)-1]))
	g.Expect(int64(h.Min())).To(Equal(samples[0]))
}

func TestMergeEqualsRecordingEverythingInOne(t *testing.T) {
	g := NewWithT(t)
	var all, a, b, empty Histogram
	for v := range 5000 {
		d := time.Duration(v*v + 17)
		all.Record(d)
		if v%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	var merged Histogram
	merged.Merge(&empty)
	merged.Merge(&a)
	merged.Merge(&b)
	merged.Merge(&empty)
	g.Expect(merged.Count()).To(Equal(all.Count()))
	g.Expect(merged.Min()).To(Equal(all.Min()))
	g.Expect(merged.Max()).To(Equal(all.Max()))
	g.Expect(merged.Mean()).To(Equal(all.Mean()))
	for _, q := range []float64{0.1, 0.5, 0.99, 0.999} {
		g.Expect(merged.Quantile(q)).To(Equal(all.Quantile(q)), "q=%v", q)
	}
}

func TestEmptyAndNegative(t *testing.T) {
	g := NewWithT(t)
	var h Histogram
	g.Expect(h.Quantile(0.99)).To(BeZero())
	g.Expect(h.Mean()).To(BeZero())
	h.Record(-time.Second)
	g.Expect(h.Count()).To(Equal(uint64(1)))
	g.Expect(h.Max()).To(BeZero())
}
