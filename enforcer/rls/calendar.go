package rls

import (
	"strconv"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// calendarUnits are the units Envoy reports for calendar windows: the
// calendar's, whatever the window's length in hours.
var calendarUnits = map[config.CalendarUnit]ratelimitv3.RateLimitResponse_RateLimit_Unit{
	config.CalendarDay:   ratelimitv3.RateLimitResponse_RateLimit_DAY,
	config.CalendarWeek:  ratelimitv3.RateLimitResponse_RateLimit_WEEK,
	config.CalendarMonth: ratelimitv3.RateLimitResponse_RateLimit_MONTH,
	config.CalendarYear:  ratelimitv3.RateLimitResponse_RateLimit_YEAR,
}

// calendarLimit fills l for a calendar window w: its unit, and a name
// saying the zone when l has none ("10000/month (Europe/Berlin)").
func calendarLimit(l *ratelimitv3.RateLimitResponse_RateLimit, w limiter.Window) *ratelimitv3.RateLimitResponse_RateLimit {
	l.Unit = calendarUnits[w.Calendar.Unit]
	if l.Name == "" {
		l.Name = strconv.FormatInt(w.Requests, 10) + "/" + w.Calendar.String()
	}
	return l
}
