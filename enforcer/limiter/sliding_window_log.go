package limiter

import (
	"errors"
	"strconv"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// SlidingWindowLog records every request's time and counts those in the
// last Period: exact, with memory proportional to Requests.
const SlidingWindowLog = config.SlidingWindowLog

var slidingWindowLog = algorithm{
	name:   SlidingWindowLog,
	code:   "swl",
	script: newScript("sliding_window_log.lua"),
	single: newScript("sliding_window_log_single.lua"),
	args:   windowArgs,
	read:   (*localWindow).readSlidingWindowLog,
	answer: (*localWindow).answerSlidingWindowLog,
	singleAnswer: func(w Window, state string, now, cost int64, allowed bool) (remaining, reset, retry int64, err error) {
		// the script answers short only when it recorded the request
		count, err := strconv.ParseInt(state, 10, 64)
		if err != nil {
			return 0, 0, 0, err
		}
		if !allowed {
			return 0, 0, 0, errors.New("a refusal without its log's times")
		}
		return max(0, w.Requests-count-cost), now + w.Period.Milliseconds()*1000, 0, nil
	},
}

func (p *localWindow) readSlidingWindowLog(now, cost int64) bool {
	if !p.fresh {
		// the window is (now - period, now]: an entry leaves at its time + period
		p.entry.log.trim(now - p.period)
		p.count = int64(p.entry.log.n)
	}
	return p.count+cost <= p.requests
}

func (p *localWindow) answerSlidingWindowLog(now, cost int64, allowed bool) (remaining, reset, retry int64) {
	count, e := p.count, p.entry
	reset = now
	if allowed && cost > 0 {
		count += cost
		reset = now + p.period
		if e != nil {
			if e.log == nil {
				e.log = &timeLog{}
			}
			e.log.push(now, int(cost))
			reset = e.log.newest() + p.period
			e.expires = reset
		}
	} else if count > 0 {
		if !allowed && count+cost > p.requests {
			// the (count + cost - requests)-th oldest entry must leave first
			k := count + cost - p.requests
			retry = max(0, e.log.at(int(k-1))+p.period-now)
		}
		reset = e.log.newest() + p.period
	}
	return max(0, p.requests-count), reset, retry
}

// timeLog is a ring buffer of the times (µs) of a sliding log's entries,
// oldest first; its length is a power of two.
type timeLog struct {
	buf     []int64
	head, n int
}

// minTimeLog is the smallest buffer; shrinking stops there.
const minTimeLog = 8

func (r *timeLog) at(i int) int64 {
	return r.buf[(r.head+i)&(len(r.buf)-1)]
}

func (r *timeLog) newest() int64 {
	return r.at(r.n - 1)
}

// trim drops the entries at or before cutoff, and halves the buffer when it
// is mostly empty so a past burst does not pin memory.
func (r *timeLog) trim(cutoff int64) {
	for r.n > 0 && r.buf[r.head] <= cutoff {
		r.head = (r.head + 1) & (len(r.buf) - 1)
		r.n--
	}
	if len(r.buf) > minTimeLog && r.n <= len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
}

// push records count entries at t. Times stay sorted: if the clock stepped
// back, the entries are recorded at the newest time instead.
func (r *timeLog) push(t int64, count int) {
	if r.n > 0 {
		t = max(t, r.newest())
	}
	if need := r.n + count; need > len(r.buf) {
		size := max(minTimeLog, len(r.buf))
		for size < need {
			size *= 2
		}
		r.resize(size)
	}
	mask := len(r.buf) - 1
	for i := range count {
		r.buf[(r.head+r.n+i)&mask] = t
	}
	r.n += count
}

func (r *timeLog) resize(size int) {
	buf := make([]int64, size)
	for i := range r.n {
		buf[i] = r.at(i)
	}
	r.buf, r.head = buf, 0
}
