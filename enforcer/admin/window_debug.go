package admin

import (
	"encoding/json"

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

// MarshalJSON writes the window with the fields its kind has: a calendar
// window has no period, a Concurrency window neither requests nor period
// (a zero would read as a limit of nothing).
func (w WindowUsage) MarshalJSON() ([]byte, error) {
	type fields WindowUsage // without this method
	var period *config.Duration
	if w.Period.Duration != 0 {
		period = &w.Period
	}
	return json.Marshal(struct {
		fields
		Requests int64            `json:"requests,omitempty"`
		Period   *config.Duration `json:"period,omitempty"`
	}{fields(w), w.Requests, period})
}
