package admin

import (
	"time"

	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// calendarWindowAt is w's window holding now, nil for a window of a period.
func calendarWindowAt(w limiter.Window, now time.Time) *debugapi.CalendarWindow {
	if w.Calendar == nil {
		return nil
	}
	start, end := w.Calendar.Window(now)
	return &debugapi.CalendarWindow{TimeZone: w.Calendar.Location().String(), Start: start, End: end,
		Seconds: int64(end.Sub(start) / time.Second)}
}

// CalendarWindowAt is w's window holding now, nil for a window of a
// period: for views other than this package's, such as sluice-ratelimit's.
func CalendarWindowAt(w limiter.Window, now time.Time) *debugapi.CalendarWindow {
	return calendarWindowAt(w, now)
}
