package limiter

import (
	"math"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// SlidingWindowCounter weights the previous fixed window's count by how much
// of it still overlaps the sliding window: O(1) memory, close to exact.
const SlidingWindowCounter = config.SlidingWindowCounter

var slidingWindowCounter = algorithm{
	name:   SlidingWindowCounter,
	code:   "swc",
	script: newScript("sliding_window_counter.lua"),
	single: newScript("sliding_window_counter_single.lua"),
	args:   windowArgs,
	read:   (*localWindow).readSlidingWindowCounter,
	answer: (*localWindow).answerSlidingWindowCounter,
}

func (p *localWindow) readSlidingWindowCounter(now, cost int64) bool {
	e := p.entry
	p.win = floorDiv(now, p.period)
	if !p.fresh {
		if e.win == p.win {
			p.count, p.prev = e.cur, e.prev
		} else if e.win == p.win-1 {
			p.prev = e.cur
		}
	}
	start := p.win * p.period
	p.estimate = float64(p.prev)*float64(p.period-(now-start))/float64(p.period) + float64(p.count)
	return p.estimate+float64(cost) <= float64(p.requests)+localEps
}

func (p *localWindow) answerSlidingWindowCounter(now, cost int64, allowed bool) (remaining, reset, retry int64) {
	period, cur, prev, estimate := p.period, p.count, p.prev, p.estimate
	start := p.win * period
	if allowed {
		if cost > 0 {
			cur += cost
			estimate += float64(cost)
			if e := p.entry; e != nil {
				e.win, e.cur, e.prev = p.win, cur, prev
				// the current count still weighs until the end of the next window
				e.expires = now + expiryMs(float64(ceilDiv(start+2*period-now, 1000)))
			}
		}
	} else if estimate+float64(cost) > float64(p.requests)+localEps {
		free := p.requests - cost
		var at int64
		if cur <= free {
			// this window: wait until prev's weight w satisfies prev*w <= free - cur
			// (prev > 0 here, or the estimate would be cur and cost would fit)
			at = start + int64(math.Ceil(float64(period)*(1-float64(free-cur)/float64(prev))))
		} else {
			// next window, where the current count becomes the weighted one
			at = start + period + int64(math.Ceil(float64(period)*max(0, 1-float64(free)/float64(cur))))
		}
		retry = max(0, at-now)
	}
	reset = now
	if cur > 0 {
		reset = start + 2*period
	} else if prev > 0 {
		reset = start + period
	}
	remaining = int64(math.Floor(float64(p.requests) - estimate + localEps))
	return remaining, reset, retry
}
