package limiter

import (
	"strconv"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// GCRA is the generic cell rate algorithm: one timestamp per window, the
// theoretical arrival time, spaced Period/Requests per unit of cost, with
// Burst (default Requests) units of tolerance. It admits what a TokenBucket
// of the same Requests, Period and Burst admits, in less memory, and its
// Retry-After is exact to the microsecond.
const GCRA = config.GCRA

var gcra = algorithm{
	name:   GCRA,
	code:   "gcra",
	script: newScript("gcra.lua"),
	single: newScript("gcra_single.lua"),
	args:   gcraArgs,
	read:   (*localWindow).readGCRA,
	answer: (*localWindow).answerGCRA,
	singleAnswer: func(w Window, state string, now, cost int64, allowed bool) (remaining, reset, retry int64, err error) {
		tat, err := strconv.ParseInt(state, 10, 64)
		if err != nil {
			return 0, 0, 0, err
		}
		interval, tolerance := gcraSpacing(w.Requests, w.Period.Microseconds(), w.capacity(GCRA))
		remaining, reset, retry = gcraAnswer(tat, interval, tolerance, now, cost, allowed)
		return remaining, reset, retry, nil
	},
	leases: true,
}

// gcraMaxTolerance bounds a window's tolerance (about 35 years of µs) so
// that every TAT stays an exact integer in the script's doubles.
const gcraMaxTolerance = 1 << 50

// gcraSpacing is a window's emission interval, period (µs) / requests
// rounded up to a whole microsecond, and its tolerance, capacity intervals.
func gcraSpacing(requests, period, capacity int64) (interval, tolerance int64) {
	interval = ceilDiv(period, requests)
	if capacity > gcraMaxTolerance/interval {
		return interval, gcraMaxTolerance
	}
	return interval, capacity * interval
}

// gcraArgs is a window's ARGV: emission interval and tolerance, in µs.
func gcraArgs(dst []any, w Window) []any {
	interval, tolerance := gcraSpacing(w.Requests, w.Period.Microseconds(), w.capacity(GCRA))
	return append(dst, interval, tolerance)
}

func (p *localWindow) readGCRA(now, cost int64) bool {
	p.interval, p.tolerance = gcraSpacing(p.requests, p.period, p.capacity)
	p.tat = now
	if !p.fresh {
		p.tat = max(now, p.entry.last)
	}
	return p.tat+cost*p.interval-now <= p.tolerance
}

func (p *localWindow) answerGCRA(now, cost int64, allowed bool) (remaining, reset, retry int64) {
	tat := p.tat
	if allowed && cost > 0 {
		tat += cost * p.interval
		if e := p.entry; e != nil {
			// once reached, the TAT equals no state: let it expire then
			e.last = tat
			e.expires = now + expiryMs(float64(ceilDiv(tat-now, 1000)))
		}
	}
	return gcraAnswer(tat, p.interval, p.tolerance, now, cost, allowed)
}

// gcraAnswer is the remaining, reset and retry of a window whose TAT is tat
// at now after a decision of cost: the scripts' arithmetic, for Local and
// for the reply of the single-window script, which answers tat.
func gcraAnswer(tat, interval, tolerance, now, cost int64, allowed bool) (remaining, reset, retry int64) {
	if due := tat + cost*interval - tolerance; !allowed && due > now {
		retry = due - now
	}
	// a debt or a lowered limit can leave the TAT beyond the tolerance:
	// remaining below zero, floored as the script's
	return floorDiv(tolerance-(tat-now), interval), tat, retry
}
