package admin

import (
	"time"

	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// CalendarWindow is the current window of a calendar limit, its bounds
// written in the calendar's zone (2026-03-01T00:00:00+01:00), and its
// length, which varies with the month and daylight-saving changes.
type CalendarWindow struct {
	TimeZone string    `json:"timeZone"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Seconds  int64     `json:"seconds"`
}

// calendarWindowAt is w's window holding now, nil for a window of a period.
func calendarWindowAt(w limiter.Window, now time.Time) *CalendarWindow {
	if w.Calendar == nil {
		return nil
	}
	start, end := w.Calendar.Window(now)
	return &CalendarWindow{TimeZone: w.Calendar.Location().String(), Start: start, End: end,
		Seconds: int64(end.Sub(start) / time.Second)}
}

// windowLabel names a window in metrics and status: its period ("1m0s"),
// or its calendar ("month@Europe/Berlin").
func windowLabel(w limiter.Window) string {
	if w.Calendar != nil {
		return w.Calendar.Label()
	}
	return w.Period.String()
}

// CalendarWindowAt is w's window holding now, nil for a window of a
// period: for views other than this package's, such as sluice-ratelimit's.
func CalendarWindowAt(w limiter.Window, now time.Time) *CalendarWindow {
	return calendarWindowAt(w, now)
}
