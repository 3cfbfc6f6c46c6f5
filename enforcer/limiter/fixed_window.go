package limiter

import "github.com/sluice-dev/sluice/enforcer/config"

// FixedWindow counts requests in calendar-aligned windows of Period.
const FixedWindow = config.FixedWindow

var fixedWindow = algorithm{
	name:   FixedWindow,
	code:   "fw",
	script: newScript("fixed_window.lua"),
	single: newScript("fixed_window_single.lua"),
	args:   windowArgs,
	read:   (*localWindow).readFixedWindow,
	answer: (*localWindow).answerFixedWindow,
	leases: true,
}

func (p *localWindow) readFixedWindow(now, cost int64) bool {
	e := p.entry
	if p.cal != nil {
		p.win, p.reset = p.calendarWindow(now)
	} else {
		p.win = floorDiv(now, p.period)
		p.reset = (p.win + 1) * p.period
	}
	if !p.fresh && e.win == p.win {
		p.count = e.cur
	}
	return p.count+cost <= p.requests
}

func (p *localWindow) answerFixedWindow(now, cost int64, allowed bool) (remaining, reset, retry int64) {
	count := p.count
	reset = p.reset
	if allowed {
		if cost > 0 {
			count += cost
			if e := p.entry; e != nil {
				e.win, e.cur = p.win, count
				e.expires = now + expiryMs(float64(ceilDiv(reset-now, 1000)))
			}
		}
	} else if count+cost > p.requests {
		retry = reset - now
	}
	if count == 0 {
		reset = now
	}
	return p.requests - count, reset, retry
}
