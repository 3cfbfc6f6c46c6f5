package limiter

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// Adaptive limits. Each enforcer measures the responses to an adaptive
// rule's requests in a Meter; AdaptiveStep adds them to Redis, where one
// script per call also steps the rule's shared factor once per interval
// from every enforcer's measurements (adaptive.lua). ScaleWindows turns the
// configured windows into the ones the factor allows.

// LatencyBuckets are the upper bounds of the latency histogram every
// enforcer keeps for an adaptive rule; the last bucket has no bound. They
// are fixed, so that the histograms of all replicas add up in Redis.
var LatencyBuckets = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second,
	10 * time.Second, 30 * time.Second, time.Minute,
}

// healthyMargin is the share of the targets under which an interval counts
// as healthy: between it and the target, the factor holds (hysteresis).
const healthyMargin = 0.8

// Meter counts one adaptive rule's responses on this enforcer since the
// last AdaptiveStep. It is safe for concurrent use and allocates nothing.
type Meter struct {
	slow, warm time.Duration // the latency target and its healthy margin; 0: none
	total      atomic.Int64
	errors     atomic.Int64
	slower     atomic.Int64
	warmer     atomic.Int64
	hist       [16]atomic.Int64
}

// NewMeter measures against a's latency target.
func NewMeter(a *config.Adaptive) *Meter {
	return &Meter{slow: a.Latency.Duration, warm: time.Duration(float64(a.Latency.Duration) * healthyMargin)}
}

// Observe counts one response: its status and the time from forwarding the
// request to the response head.
func (m *Meter) Observe(latency time.Duration, status int) {
	m.total.Add(1)
	if status >= http.StatusInternalServerError && status <= 599 {
		m.errors.Add(1)
	}
	if m.slow > 0 {
		if latency > m.slow {
			m.slower.Add(1)
		}
		if latency > m.warm {
			m.warmer.Add(1)
		}
	}
	k := len(LatencyBuckets)
	for i, b := range LatencyBuckets {
		if latency <= b {
			k = i
			break
		}
	}
	m.hist[k].Add(1)
}

// MeterCounts are a Meter's counts since it was last taken.
type MeterCounts struct {
	Total, Errors, Slow, Warm int64
	Histogram                 [16]int64
}

// Take returns the counts and starts again from zero.
func (m *Meter) Take() MeterCounts {
	c := MeterCounts{Total: m.total.Swap(0), Errors: m.errors.Swap(0), Slow: m.slower.Swap(0), Warm: m.warmer.Swap(0)}
	for i := range m.hist {
		c.Histogram[i] = m.hist[i].Swap(0)
	}
	return c
}

// Restore adds back counts that could not be sent, to go with the next step.
func (m *Meter) Restore(c MeterCounts) {
	m.total.Add(c.Total)
	m.errors.Add(c.Errors)
	m.slower.Add(c.Slow)
	m.warmer.Add(c.Warm)
	for i := range m.hist {
		m.hist[i].Add(c.Histogram[i])
	}
}

// AdaptiveState is a rule's shared factor as Redis holds it, and the
// measurements of the interval it was last stepped for, across replicas.
type AdaptiveState struct {
	// Factor is the share of the configured limits in force.
	Factor config.BasisPoints
	// Interval numbers the interval the factor was last stepped for (Unix
	// time in ms / interval); Now is the interval Redis' clock is in.
	Interval, Now int64
	// Responses and Errors were measured in that interval, by every replica.
	Responses, Errors int64
	// P90 is the p90 latency of that interval (the upper bound of its
	// histogram bucket; the last bucket reports LatencyBuckets' last);
	// zero without responses.
	P90 time.Duration
	// Step is the step taken: -1 down, +1 up, 0 none (already at a bound
	// or never stepped), 2 held (too few responses, or within the margin).
	Step int
}

// ErrorRate is the share of 5xx responses of the decided interval.
func (s AdaptiveState) ErrorRate() float64 {
	if s.Responses == 0 {
		return 0
	}
	return float64(s.Errors) / float64(s.Responses)
}

var adaptiveScript = newScript("adaptive.lua")

// AdaptiveKeys are the Redis keys of the adaptive state of bucket b's rule
// (b.Tenant is ignored); they share one hash tag.
func AdaptiveKeys(b Bucket) (stats, factor string) {
	tag := "sl:{" + b.Namespace + "/" + b.Policy + "/" + b.Rule + "}:adaptive:"
	return tag + "stats", tag + "factor"
}

// AdaptiveStep adds c, measured on this enforcer, to the rule's current
// interval in Redis and returns the shared factor, stepped first if the
// previous interval has not been decided yet.
func (r *Redis) AdaptiveStep(ctx context.Context, b Bucket, a *config.Adaptive, c MeterCounts) (AdaptiveState, error) {
	stats, factor := AdaptiveKeys(b)
	latency := 0
	if a.Latency.Duration > 0 {
		latency = 1
	}
	args := make([]any, 0, 8+len(c.Histogram))
	args = append(args, a.Interval.Milliseconds(), int64(a.Minimum), int64(a.ErrorRate), latency, c.Total, c.Errors, c.Slow, c.Warm)
	for _, v := range c.Histogram {
		args = append(args, v)
	}
	keys := []string{stats, factor}
	raw, err := r.client.EvalSha(ctx, adaptiveScript.sha, keys, args...).Result()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		raw, err = r.client.Eval(ctx, adaptiveScript.src, keys, args...).Result()
	}
	if err != nil {
		return AdaptiveState{}, fmt.Errorf("redis adaptive %s: %w", b.Namespace+"/"+b.Policy+"/"+b.Rule, err)
	}
	vals, ok := raw.([]any)
	if !ok || len(vals) != 7 {
		return AdaptiveState{}, fmt.Errorf("redis adaptive: unexpected reply %v", raw)
	}
	var n [7]int64
	for i, v := range vals {
		if n[i], ok = v.(int64); !ok {
			return AdaptiveState{}, fmt.Errorf("redis adaptive: unexpected reply %v", raw)
		}
	}
	s := AdaptiveState{Factor: config.BasisPoints(n[0]), Interval: n[1], Responses: n[2], Errors: n[3], Step: int(n[5]), Now: n[6]}
	switch p := n[4]; {
	case p >= int64(len(LatencyBuckets)):
		s.P90 = LatencyBuckets[len(LatencyBuckets)-1]
	case p >= 0:
		s.P90 = LatencyBuckets[p]
	}
	return s, nil
}

// ScaleWindows are windows scaled by factor: requests (and a burst when
// set) times factor, rounded down, at least 1 and at least cost where it is
// the window's capacity, so that a request can still pass. At Full it
// returns windows itself.
func ScaleWindows(a Algorithm, windows []Window, cost int64, factor config.BasisPoints) []Window {
	if factor >= config.Full {
		return windows
	}
	out := make([]Window, len(windows))
	for i, w := range windows {
		out[i] = Window{Requests: scale(w.Requests, factor), Period: w.Period, Calendar: w.Calendar}
		if w.Burst > 0 {
			out[i].Burst = scale(w.Burst, factor)
		}
		if c := out[i].capacity(a); c < cost {
			if out[i].Burst > 0 && (a == config.TokenBucket || a == config.GCRA) {
				out[i].Burst = cost
			} else {
				out[i].Requests = max(out[i].Requests, cost)
			}
		}
	}
	return out
}

func scale(n int64, factor config.BasisPoints) int64 {
	if n > math.MaxInt64/int64(config.Full) {
		return max(1, n/int64(config.Full)*int64(factor))
	}
	return max(1, n*int64(factor)/int64(config.Full))
}
