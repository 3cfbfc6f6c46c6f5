package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// CalendarUnit is the length of a calendar window.
type CalendarUnit string

const (
	// CalendarDay resets at local midnight.
	CalendarDay CalendarUnit = "Day"
	// CalendarWeek resets at local midnight of the week's first day.
	CalendarWeek CalendarUnit = "Week"
	// CalendarMonth resets at local midnight of the month's first day.
	CalendarMonth CalendarUnit = "Month"
	// CalendarYear resets at local midnight of January 1st.
	CalendarYear CalendarUnit = "Year"
)

// CalendarUnits lists every CalendarUnit, shortest first.
var CalendarUnits = []CalendarUnit{CalendarDay, CalendarWeek, CalendarMonth, CalendarYear}

// Weekdays are the values of Calendar.WeekStart, in time.Weekday order.
var Weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

// Calendar is a window aligned to the calendar of an IANA time zone instead
// of a duration since the Unix epoch: a Month window of Europe/Berlin runs
// from local midnight of the 1st to local midnight of the next 1st, whatever
// the month's length and its daylight-saving changes.
type Calendar struct {
	Unit CalendarUnit `json:"unit"`
	// TimeZone is an IANA zone name; empty means UTC.
	TimeZone string `json:"timeZone,omitempty"`
	// WeekStart is the first day of a Week window; empty means Monday.
	WeekStart string `json:"weekStart,omitempty"`

	// loc is TimeZone, loaded by Resolve, and label the Label it gives.
	loc   *time.Location
	label string
}

// Resolve loads the calendar's time zone, once; every window is computed in
// it. An unknown zone name is an error naming it.
func (c *Calendar) Resolve() error {
	if c.loc != nil {
		return nil
	}
	name := c.TimeZone
	if name == "" {
		name = "UTC"
	}
	// LoadLocation reads a path for names it does not know: refuse what
	// cannot be a zone name before it does.
	if name == "Local" || strings.Contains(name, "..") || strings.HasPrefix(name, "/") {
		return fmt.Errorf("time zone %q is not an IANA time zone name such as Europe/Berlin or America/New_York", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return fmt.Errorf("time zone %q is not a known IANA time zone name such as Europe/Berlin or America/New_York", name)
	}
	c.loc = loc
	c.label = c.labelOf()
	return nil
}

// Location is the calendar's zone (UTC when it was never resolved).
func (c *Calendar) Location() *time.Location {
	if c.loc == nil && c.Resolve() != nil {
		return time.UTC
	}
	return c.loc
}

// weekStart is the first day of a Week window.
func (c *Calendar) weekStart() time.Weekday {
	if i := slices.Index(Weekdays, c.WeekStart); i >= 0 {
		return time.Weekday(i)
	}
	return time.Monday
}

// Window is the calendar window holding t: its first instant and the first
// instant of the next one. Windows start at local midnight; where the zone
// skips midnight (a daylight-saving change at 00:00), a day starts at its
// first instant, the end of the skipped hour.
func (c *Calendar) Window(t time.Time) (start, end time.Time) {
	loc := c.Location()
	y, m, d := t.In(loc).Date()
	switch c.Unit {
	case CalendarWeek:
		back := (int(t.In(loc).Weekday()) - int(c.weekStart()) + 7) % 7
		return dayStart(y, m, d-back, loc), dayStart(y, m, d-back+7, loc)
	case CalendarMonth:
		return dayStart(y, m, 1, loc), dayStart(y, m+1, 1, loc)
	case CalendarYear:
		return dayStart(y, 1, 1, loc), dayStart(y+1, 1, 1, loc)
	default:
		return dayStart(y, m, d, loc), dayStart(y, m, d+1, loc)
	}
}

// dayStart is the first instant of the local day y-m-d (normalised as
// time.Date does: day 0 is the last of the previous month).
func dayStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	wy, wm, wd := time.Date(y, m, d, 12, 0, 0, 0, loc).Date()
	if ty, tm, td := t.Date(); ty != wy || tm != wm || td != wd {
		// midnight does not exist, and time.Date read it with the offset
		// after the change: it landed on the day before; the day starts
		// where that zone period ends
		_, t = t.ZoneBounds()
	}
	return t
}

// Label names the calendar in Redis keys and metrics: the unit, the week's
// start when it is not Monday, and the zone, such as month@Europe/Berlin or
// week-sunday@UTC.
func (c *Calendar) Label() string {
	if c.label != "" {
		return c.label
	}
	return c.labelOf()
}

func (c *Calendar) labelOf() string {
	unit := strings.ToLower(string(c.Unit))
	if c.Unit == CalendarWeek && c.weekStart() != time.Monday {
		unit += "-" + strings.ToLower(c.weekStart().String())
	}
	return unit + "@" + c.Location().String()
}

// String describes the calendar for people: "month (Europe/Berlin)",
// "week from Sunday (UTC)".
func (c *Calendar) String() string {
	unit := strings.ToLower(string(c.Unit))
	if c.Unit == CalendarWeek && c.weekStart() != time.Monday {
		unit += " from " + c.weekStart().String()
	}
	return unit + " (" + c.Location().String() + ")"
}

// validate checks c at path, and loads its zone.
func (c *Calendar) validate(path string, add addFunc) {
	oneOf(add, path+".unit", c.Unit, CalendarUnits)
	if c.WeekStart != "" {
		if c.Unit != CalendarWeek {
			add(path+".weekStart", "only a Week calendar has a weekStart")
		}
		oneOf(add, path+".weekStart", c.WeekStart, Weekdays)
	}
	if err := c.Resolve(); err != nil {
		add(path+".timeZone", "%v", err)
	}
}

// validateCalendar checks the calendar of limit l, at path at, the i-th of
// the limits at path: a FixedWindow rule's, without a period, one per unit.
func (r *Rule) validateCalendar(at string, l Limit, units map[CalendarUnit]int, i int, path string, add addFunc) {
	if l.Period.Duration != 0 {
		add(at, "a limit has a period or a calendar, not both")
	}
	if r.Algorithm != FixedWindow {
		add(at+".calendar", "calendar windows are counted by FixedWindow only, not %s", r.Algorithm)
	}
	if j, dup := units[l.Calendar.Unit]; dup {
		add(at+".calendar", "%s is also the calendar unit of %s[%d]: one limit per unit", l.Calendar.Unit, path, j)
	} else {
		units[l.Calendar.Unit] = i
	}
	l.Calendar.validate(at+".calendar", add)
}

// HasCalendar reports whether any limit of r, its tiers' or its overrides',
// is a calendar window.
func (r *Rule) HasCalendar() bool {
	has := func(limits []Limit) bool {
		return slices.ContainsFunc(limits, func(l Limit) bool { return l.Calendar != nil })
	}
	if has(r.Limits) {
		return true
	}
	for _, ls := range r.TierLimits {
		if has(ls) {
			return true
		}
	}
	for _, o := range r.Overrides {
		if has(o.Limits) {
			return true
		}
	}
	return false
}

// CalendarIn is a calendar of unit in a zone already loaded, such as one
// of time.FixedZone.
func CalendarIn(unit CalendarUnit, loc *time.Location) *Calendar {
	c := &Calendar{Unit: unit, TimeZone: loc.String(), loc: loc}
	c.label = c.labelOf()
	return c
}
