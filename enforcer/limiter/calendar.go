package limiter

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// Calendar windows (FixedWindow only) are aligned to the calendar of a time
// zone, so their length varies: a day of a daylight-saving change lasts 23
// or 25 hours, a month 28 to 31 days. Redis' TIME stays the one clock: the
// enforcer computes the window it believes current from its own clock and
// sends the window's start and end with the call; the script checks them
// against TIME and, when now lies outside, answers "STALE <now_µs>" without
// counting, and the enforcer computes the window again at Redis' now and
// sends the call once more. A window's key carries its start, and expires
// after its end.

// staleWindow is the prefix of the error a script answers when a calendar
// window it was sent is not current at its TIME.
const staleWindow = "STALE"

// windowID is what tells the windows of one rule apart (their Redis keys,
// the local fallback's state): the period, or for a calendar window a
// negative number per unit, of which a rule has at most one.
func (w Window) windowID() time.Duration {
	if w.Calendar == nil {
		return w.Period
	}
	for i, u := range config.CalendarUnits {
		if u == w.Calendar.Unit {
			return -time.Duration(i + 1)
		}
	}
	return -1
}

// Length is the length of the window holding now: the period, or the
// calendar window's, in its zone.
func (w Window) Length(now time.Time) time.Duration {
	if w.Calendar == nil {
		return w.Period
	}
	start, end := w.Calendar.Window(now)
	return end.Sub(start)
}

// bounds is the window of w holding at (µs): its start and end in ms, for a
// calendar window.
func (w Window) bounds(at int64) (start, end int64) {
	s, e := w.Calendar.Window(time.UnixMicro(at))
	return s.UnixMilli(), e.UnixMilli()
}

// appendCalendarLabel writes the key part of a calendar window starting at
// start (ms): "month@Europe/Berlin:1767222000000".
func appendCalendarLabel(dst []byte, c *config.Calendar, start int64) []byte {
	dst = append(dst, c.Label()...)
	dst = append(dst, ':')
	return strconv.AppendInt(dst, start, 10)
}

// calendarArgs is the ARGV of one calendar window: requests, then
// "start:end" in ms, where the script expects a period.
func calendarArgs(dst []any, w Window, start, end int64) []any {
	b := strconv.AppendInt(make([]byte, 0, 28), start, 10)
	b = append(b, ':')
	return append(dst, w.Requests, string(strconv.AppendInt(b, end, 10)))
}

// hasCalendar reports whether any of windows is a calendar window.
func hasCalendar(windows []Window) bool {
	for _, w := range windows {
		if w.Calendar != nil {
			return true
		}
	}
	return false
}

// staleAt reads Redis' now from a script's stale window answer.
func staleAt(err error) (time.Time, bool) {
	if !redis.HasErrorPrefix(err, staleWindow) {
		return time.Time{}, false
	}
	us, perr := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(err.Error(), staleWindow)), 10, 64)
	if perr != nil {
		return time.Time{}, false
	}
	return time.UnixMicro(us), true
}

// believedNow is the time an enforcer computes req's calendar windows at:
// its own clock, which Redis' TIME corrects when they disagree on the
// window. 0 for a request without calendar windows.
func (r *Redis) believedNow(req *Request) int64 {
	if !req.f.calendar {
		return 0
	}
	return r.wall().UnixMicro()
}

// wall is the enforcer's clock for calendar windows.
func (r *Redis) wall() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// receiveWindow waits for c's reply and, when the script found a calendar
// window stale, computes the windows again at Redis' now and asks once more.
func (r *Redis) receiveWindow(ctx context.Context, req *Request, cost, extra int64, s algorithmScript, c scriptCall, peek bool) (any, error) {
	raw, err := r.receive(ctx, s, c)
	at, stale := staleAt(err)
	if !stale {
		return raw, err
	}
	s, args := evalSHA(req, cost, extra, at.UnixMicro())
	if peek {
		args = append(args, peekArg)
		return r.receive(ctx, s, r.send(ctx, args))
	}
	return r.receive(ctx, s, r.sendTaking(ctx, req, s, args, cost, extra))
}

// readCalendarWindow is the local fallback's fixed window for a calendar
// window: the window number is its start (ms), as in Redis.
func (p *localWindow) calendarWindow(now int64) (win, reset int64) {
	start, end := p.cal.Window(time.UnixMicro(now))
	return start.UnixMilli(), end.UnixMicro()
}
