package main

import (
	"math"
	"math/bits"
	"time"
)

// subBucketBits sets the histogram's precision: each power-of-two range of
// values is split into 2^subBucketBits equal buckets, so a recorded value is
// known to within 1/128 (0.8%) of itself, and values below 256 exactly.
// That is the log-linear layout of an HDR histogram with two significant
// digits, in 7,300 buckets for any int64.
const subBucketBits = 7

const (
	subBuckets = 1 << subBucketBits
	// bucketCount covers every non-negative int64: the largest shift is
	// 63-(subBucketBits+1), and each shift adds subBuckets indexes.
	bucketCount = (63-subBucketBits)*subBuckets + subBuckets
)

// Histogram records latencies in nanoseconds. The zero value is empty and
// ready; it is not safe for concurrent use: give each worker its own and
// Merge them.
type Histogram struct {
	counts   []uint64
	count    uint64
	sum      float64
	min, max int64
}

// bucketIndex is the bucket holding v (v >= 0). Values below
// 2*subBuckets have a bucket each; above, v's top subBucketBits+1 bits pick
// the bucket within its power of two.
func bucketIndex(v int64) int {
	shift := bits.Len64(uint64(v)) - (subBucketBits + 1)
	if shift <= 0 {
		return int(v)
	}
	return shift*subBuckets + int(v>>shift)
}

// bucketBounds are the smallest and largest values bucket i holds.
func bucketBounds(i int) (lo, hi int64) {
	if i < 2*subBuckets {
		return int64(i), int64(i)
	}
	shift := i/subBuckets - 1
	mantissa := int64(i - shift*subBuckets)
	lo = mantissa << shift
	return lo, lo + (int64(1) << shift) - 1
}

// Record adds one value; negative values count as zero.
func (h *Histogram) Record(v time.Duration) {
	n := max(int64(v), 0)
	if h.counts == nil {
		h.counts = make([]uint64, bucketCount)
	}
	h.counts[bucketIndex(n)]++
	if h.count == 0 || n < h.min {
		h.min = n
	}
	if n > h.max {
		h.max = n
	}
	h.count++
	h.sum += float64(n)
}

// Merge adds every value of o.
func (h *Histogram) Merge(o *Histogram) {
	if o.count == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, bucketCount)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.count == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.count += o.count
	h.sum += o.sum
}

// Count is how many values were recorded.
func (h *Histogram) Count() uint64 { return h.count }

// Min and Max are the exact extremes; zero when empty.
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is the exact arithmetic mean; zero when empty.
func (h *Histogram) Mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.count))
}

// Quantile is the value below or at which a fraction q (0..1) of the
// recorded values lie: the largest value of the bucket holding the value of
// rank ceil(q*count), capped at the exact maximum, so a percentile is never
// understated by more than the bucket's rounding, and Quantile(1) is Max.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	if q <= 0 {
		return time.Duration(h.min)
	}
	rank := uint64(math.Ceil(q * float64(h.count)))
	rank = min(max(rank, 1), h.count)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, hi := bucketBounds(i)
			return time.Duration(min(hi, h.max))
		}
	}
	return time.Duration(h.max)
}
