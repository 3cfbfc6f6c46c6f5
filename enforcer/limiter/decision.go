package limiter

import "time"

// decide turns per-window results into a Decision described by the deciding
// window: when refused, the window with the longest wait (every window must
// admit the request, so that wait is the answer); when allowed, the window
// with the fewest requests remaining.
func decide(req *Request, allowed bool, now time.Time, results []WindowResult) Decision {
	pick := 0
	for i, r := range results[1:] {
		i++
		if allowed && r.Remaining < results[pick].Remaining ||
			!allowed && r.Retry > results[pick].Retry {
			pick = i
		}
	}
	r := results[pick]
	d := Decision{
		Allowed:   allowed,
		Window:    pick,
		Limit:     req.Windows[pick].capacity(req.Algorithm),
		Period:    req.Windows[pick].Length(now),
		Calendar:  req.Windows[pick].Calendar,
		Remaining: max(r.Remaining, 0),
		Reset:     r.Reset,
		Now:       now,
		CountedAt: now,
	}
	if !allowed {
		d.RetryAfter = r.Retry
	}
	if req.f.debts {
		d.Debt = max(-r.Remaining, 0)
	}
	return d
}
