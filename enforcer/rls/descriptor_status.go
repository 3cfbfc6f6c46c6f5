package rls

import (
	"fmt"
	"math"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// A descriptor's status in the response: its code, the limit that
// decided it, what is left and when it is whole again.

// noLimitStatus answers a descriptor no limit applies to, as
// envoyproxy/ratelimit does: an unlimited one reports all the room there is.
func noLimitStatus(outcome string) *ratelimitv3.RateLimitResponse_DescriptorStatus {
	st := &ratelimitv3.RateLimitResponse_DescriptorStatus{Code: ratelimitv3.RateLimitResponse_OK}
	if outcome == outcomeUnlimited {
		st.LimitRemaining = math.MaxUint32
	}
	return st
}

// descriptorStatus reports a decision under windows (the rule's, its
// tier's or its override's): the deciding window as current_limit, what
// it has left, and how long until the descriptor is admitted again
// (refused) or its window is whole again (admitted). A decision of the
// Open or Closed failure mode counted nothing and knows no count: it
// reports its code alone (Closed: and when to ask again), no limit, as
// the headers leave it out, so that Envoy's headers leave it out too.
func descriptorStatus(r *Rule, windows []limiter.Window, d limiter.Decision) *ratelimitv3.RateLimitResponse_DescriptorStatus {
	st := &ratelimitv3.RateLimitResponse_DescriptorStatus{Code: ratelimitv3.RateLimitResponse_OK}
	if !d.Allowed {
		st.Code = ratelimitv3.RateLimitResponse_OVER_LIMIT
	}
	if d.Degraded && r.domain.failure.Mode != config.FailLocal {
		if !d.Allowed {
			st.DurationUntilReset = durationpb.New(max(d.RetryAfter, 0))
		}
		return st
	}
	w := windows[min(d.Window, len(windows)-1)]
	st.CurrentLimit = currentLimit(r.LimitName, w)
	st.LimitRemaining = uint32(min(max(d.Remaining, 0), math.MaxUint32))
	until := d.Reset.Sub(d.Now)
	if !d.Allowed {
		until = d.RetryAfter
	}
	st.DurationUntilReset = durationpb.New(max(until, 0))
	return st
}

// units are the response's units with their length; a month is 30 days
// and a year 365, as envoyproxy/ratelimit counts them.
var units = []struct {
	unit   ratelimitv3.RateLimitResponse_RateLimit_Unit
	period time.Duration
}{
	{ratelimitv3.RateLimitResponse_RateLimit_SECOND, time.Second},
	{ratelimitv3.RateLimitResponse_RateLimit_MINUTE, time.Minute},
	{ratelimitv3.RateLimitResponse_RateLimit_HOUR, time.Hour},
	{ratelimitv3.RateLimitResponse_RateLimit_DAY, 24 * time.Hour},
	{ratelimitv3.RateLimitResponse_RateLimit_WEEK, 7 * 24 * time.Hour},
	{ratelimitv3.RateLimitResponse_RateLimit_MONTH, 30 * 24 * time.Hour},
	{ratelimitv3.RateLimitResponse_RateLimit_YEAR, 365 * 24 * time.Hour},
}

// currentLimit is window w as a response reports it: requests per unit
// when its period is one unit; otherwise the unit is UNKNOWN and the name
// says what the limit is ("100/5m").
func currentLimit(name string, w limiter.Window) *ratelimitv3.RateLimitResponse_RateLimit {
	l := &ratelimitv3.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: uint32(min(w.Requests, math.MaxUint32))}
	if w.Calendar != nil {
		return calendarLimit(l, w)
	}
	for _, u := range units {
		if u.period == w.Period {
			l.Unit = u.unit
			return l
		}
	}
	l.Unit = ratelimitv3.RateLimitResponse_RateLimit_UNKNOWN
	spelled := fmt.Sprintf("%d/%s", w.Requests, periodString(w.Period))
	if name == "" {
		l.Name = spelled
	} else {
		l.Name = name + " (" + spelled + ")"
	}
	return l
}

// periodString writes a period in its largest whole unit: 5m, 90s, 1500ms.
func periodString(p time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if p%u.d == 0 {
			return fmt.Sprintf("%d%s", p/u.d, u.name)
		}
	}
	return fmt.Sprintf("%dms", p/time.Millisecond)
}
