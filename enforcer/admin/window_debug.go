package admin

import (
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// WindowLimit is window w of a rule deciding with algorithm a as
// /debug/tenant shows it: requests per period, requests per calendar
// window (its unit and zone, UTC when the policy names none), or a
// Concurrency rule's requests in flight at once.
func WindowLimit(a limiter.Algorithm, w limiter.Window) config.Limit {
	if a == limiter.Concurrency {
		return config.Limit{Concurrent: w.Requests}
	}
	l := config.Limit{Requests: w.Requests, Burst: w.Burst}
	if w.Calendar == nil {
		l.Period = config.Duration{Duration: w.Period}
		return l
	}
	c := *w.Calendar
	if c.TimeZone == "" {
		c.TimeZone = "UTC"
	}
	l.Calendar = &c
	return l
}
