package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// calendar is a resolved calendar of unit in zone.
func calendar(t *testing.T, unit CalendarUnit, zone string) *Calendar {
	t.Helper()
	c := &Calendar{Unit: unit, TimeZone: zone}
	if err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCalendarWindowsAcrossTheCalendar(t *testing.T) {
	cases := []struct {
		name       string
		unit       CalendarUnit
		zone       string
		at         string // RFC 3339
		start, end string // RFC 3339, in the zone
		hours      float64
	}{
		{"Berlin spring-forward day lasts 23h", CalendarDay, "Europe/Berlin", "2026-03-29T12:00:00+02:00", "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 23},
		{"Berlin fall-back day lasts 25h", CalendarDay, "Europe/Berlin", "2026-10-25T02:30:00+01:00", "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00", 25},
		{"Berlin: the last second before the 23h day's midnight", CalendarDay, "Europe/Berlin", "2026-03-28T23:59:59+01:00", "2026-03-28T00:00:00+01:00", "2026-03-29T00:00:00+01:00", 24},
		{"New York spring-forward day lasts 23h", CalendarDay, "America/New_York", "2026-03-08T03:00:00-04:00", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00", 23},
		{"New York fall-back day lasts 25h", CalendarDay, "America/New_York", "2026-11-01T01:30:00-05:00", "2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00", 25},
		{"New York fall-back midnight: the first second of the day", CalendarDay, "America/New_York", "2026-11-01T00:00:00-04:00", "2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00", 25},
		{"January 31st to February 1st", CalendarDay, "Europe/Berlin", "2026-01-31T23:59:59+01:00", "2026-01-31T00:00:00+01:00", "2026-02-01T00:00:00+01:00", 24},
		{"February in a common year", CalendarMonth, "Europe/Berlin", "2026-02-28T23:59:59+01:00", "2026-02-01T00:00:00+01:00", "2026-03-01T00:00:00+01:00", 28 * 24},
		{"February in a leap year", CalendarMonth, "Europe/Berlin", "2028-02-29T12:00:00+01:00", "2028-02-01T00:00:00+01:00", "2028-03-01T00:00:00+01:00", 29 * 24},
		{"March 1st after February 28th", CalendarMonth, "America/New_York", "2026-03-01T00:00:00-05:00", "2026-03-01T00:00:00-05:00", "2026-04-01T00:00:00-04:00", 31*24 - 1},
		{"a monthly quota across Berlin's spring-forward", CalendarMonth, "Europe/Berlin", "2026-03-15T10:00:00+01:00", "2026-03-01T00:00:00+01:00", "2026-04-01T00:00:00+02:00", 31*24 - 1},
		{"a monthly quota across Berlin's fall-back", CalendarMonth, "Europe/Berlin", "2026-10-31T23:59:59+01:00", "2026-10-01T00:00:00+02:00", "2026-11-01T00:00:00+01:00", 31*24 + 1},
		{"year end, Berlin", CalendarYear, "Europe/Berlin", "2026-12-31T23:59:59+01:00", "2026-01-01T00:00:00+01:00", "2027-01-01T00:00:00+01:00", 365 * 24},
		{"new year, New York", CalendarYear, "America/New_York", "2027-01-01T00:00:00-05:00", "2027-01-01T00:00:00-05:00", "2028-01-01T00:00:00-05:00", 365 * 24},
		{"a leap year", CalendarYear, "UTC", "2028-07-01T00:00:00Z", "2028-01-01T00:00:00Z", "2029-01-01T00:00:00Z", 366 * 24},
		{"a week starts on Monday", CalendarWeek, "Europe/Berlin", "2026-03-29T23:00:00+02:00", "2026-03-23T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 7*24 - 1},
		{"a week across a year end", CalendarWeek, "UTC", "2027-01-01T00:00:00Z", "2026-12-28T00:00:00Z", "2027-01-04T00:00:00Z", 7 * 24},
		// Havana moves its clocks at midnight: on 2026-03-08, 00:00 to 01:00
		// does not exist, and the day starts at 01:00 (-04:00).
		{"Havana skips midnight: the day starts at 01:00", CalendarDay, "America/Havana", "2026-03-08T12:00:00-04:00", "2026-03-08T01:00:00-04:00", "2026-03-09T00:00:00-04:00", 23},
		{"Havana: the day before a skipped midnight ends at its first instant", CalendarDay, "America/Havana", "2026-03-07T23:59:59-05:00", "2026-03-07T00:00:00-05:00", "2026-03-08T01:00:00-04:00", 24},
		{"Havana: the month holding a skipped midnight", CalendarMonth, "America/Havana", "2026-03-08T01:00:00-04:00", "2026-03-01T00:00:00-05:00", "2026-04-01T00:00:00-04:00", 31*24 - 1},
		// Santiago's spring-forward on 2026-09-06 skips 00:00 to 01:00.
		{"Santiago skips midnight", CalendarDay, "America/Santiago", "2026-09-06T09:00:00-03:00", "2026-09-06T01:00:00-03:00", "2026-09-07T00:00:00-03:00", 23},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := calendar(t, tc.unit, tc.zone)
			at := mustTime(t, tc.at)
			start, end := c.Window(at)
			if !start.Equal(mustTime(t, tc.start)) || !end.Equal(mustTime(t, tc.end)) {
				t.Fatalf("window of %s = [%s, %s), want [%s, %s)", tc.at, start.Format(time.RFC3339), end.Format(time.RFC3339), tc.start, tc.end)
			}
			if got := end.Sub(start).Hours(); got != tc.hours {
				t.Errorf("window lasts %vh, want %vh", got, tc.hours)
			}
		})
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCalendarWindowsTileTime walks every zone below hour by hour over
// years of daylight-saving changes, month ends and year ends: each instant
// lies in exactly one window, windows follow each other without gap or
// overlap, and each starts at the first instant of its local day.
func TestCalendarWindowsTileTime(t *testing.T) {
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "America/Havana", "America/Santiago", "Asia/Beirut", "Australia/Lord_Howe", "Asia/Kolkata", "Pacific/Chatham"}
	from := time.Date(2024, 12, 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(2029, 2, 1, 0, 0, 0, 0, time.UTC)
	if testing.Short() {
		to = time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	}
	for _, zone := range zones {
		for _, unit := range CalendarUnits {
			c := calendar(t, unit, zone)
			loc := c.Location()
			var prevStart, prevEnd time.Time
			for at := from; at.Before(to); at = at.Add(time.Hour) {
				start, end := c.Window(at)
				if at.Before(start) || !at.Before(end) {
					t.Fatalf("%s %s: %s outside its window [%s, %s)", zone, unit, at.In(loc), start, end)
				}
				if !prevEnd.IsZero() && !start.Equal(prevStart) && !start.Equal(prevEnd) {
					t.Fatalf("%s %s: window [%s, %s) does not follow [%s, %s)", zone, unit, start, end, prevStart, prevEnd)
				}
				before := start.Add(-time.Nanosecond).In(loc)
				if y, m, d := start.In(loc).Date(); before.Year() == y && before.Month() == m && before.Day() == d {
					t.Fatalf("%s %s: window start %s is not the first instant of its day", zone, unit, start.In(loc))
				}
				if unit == CalendarMonth && start.In(loc).Day() != 1 || unit == CalendarYear && start.In(loc).YearDay() != 1 {
					t.Fatalf("%s %s: window starts %s", zone, unit, start.In(loc))
				}
				if unit == CalendarWeek && start.In(loc).Weekday() != time.Monday {
					t.Fatalf("%s %s: week starts on %s", zone, unit, start.In(loc).Weekday())
				}
				if h := end.Sub(start).Hours(); unit == CalendarDay && (h < 22 || h > 25) {
					t.Fatalf("%s %s: day [%s, %s) lasts %vh", zone, unit, start.In(loc), end.In(loc), h)
				}
				prevStart, prevEnd = start, end
			}
		}
	}
}

func TestCalendarWeekStart(t *testing.T) {
	c := &Calendar{Unit: CalendarWeek, TimeZone: "America/New_York", WeekStart: "Sunday"}
	start, end := c.Window(mustTime(t, "2026-03-11T12:00:00-04:00"))
	if want := mustTime(t, "2026-03-08T00:00:00-05:00"); !start.Equal(want) || end.Sub(start) != 7*24*time.Hour-time.Hour {
		t.Fatalf("week from Sunday = [%s, %s), want it to start %s and last 167h", start, end, want)
	}
	if got := c.Label(); got != "week-sunday@America/New_York" {
		t.Errorf("label %q", got)
	}
}

func TestCalendarRefusals(t *testing.T) {
	limit := func(c *Calendar) Limit { return Limit{Requests: 10, Calendar: c} }
	cases := []struct {
		name      string
		algorithm Algorithm
		limits    []Limit
		want      string
	}{
		{"an unknown zone is named", FixedWindow, []Limit{limit(&Calendar{Unit: CalendarMonth, TimeZone: "Europe/Berlim"})},
			`limits[0].calendar.timeZone: time zone "Europe/Berlim" is not a known IANA time zone name`},
		{"a path is not a zone", FixedWindow, []Limit{limit(&Calendar{Unit: CalendarDay, TimeZone: "../../etc/passwd"})},
			`limits[0].calendar.timeZone: time zone "../../etc/passwd" is not an IANA time zone name`},
		{"a period and a calendar", FixedWindow, []Limit{{Requests: 10, Period: Duration{time.Hour}, Calendar: &Calendar{Unit: CalendarDay}}},
			"limits[0]: a limit has a period or a calendar, not both"},
		{"a calendar on a token bucket", TokenBucket, []Limit{limit(&Calendar{Unit: CalendarDay})},
			"limits[0].calendar: calendar windows are counted by FixedWindow only, not TokenBucket"},
		{"an unknown unit", FixedWindow, []Limit{limit(&Calendar{Unit: "Fortnight"})},
			`limits[0].calendar.unit: "Fortnight" is not one of Day, Week, Month, Year`},
		{"weekStart on a month", FixedWindow, []Limit{limit(&Calendar{Unit: CalendarMonth, WeekStart: "Sunday"})},
			"limits[0].calendar.weekStart: only a Week calendar has a weekStart"},
		{"two limits of one unit", FixedWindow, []Limit{limit(&Calendar{Unit: CalendarDay}), limit(&Calendar{Unit: CalendarDay, TimeZone: "Europe/Berlin"})},
			"limits[1].calendar: Day is also the calendar unit of limits[0]: one limit per unit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Rule{Name: "r", Algorithm: tc.algorithm, Cost: 1, Limits: tc.limits}
			var got []string
			r.validateLimits("limits", r.Limits, func(path, format string, args ...any) {
				got = append(got, path+": "+fmt.Sprintf(format, args...))
			})
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Fatalf("problems %q, want one containing %q", got, tc.want)
			}
		})
	}
}

func TestCalendarDailyAndMonthlyOnOneRule(t *testing.T) {
	r := Rule{Name: "r", Algorithm: FixedWindow, Cost: 1, Limits: []Limit{
		{Requests: 100, Calendar: &Calendar{Unit: CalendarDay, TimeZone: "Europe/Berlin"}},
		{Requests: 1000, Calendar: &Calendar{Unit: CalendarMonth, TimeZone: "Europe/Berlin"}},
		{Requests: 10, Period: Duration{time.Minute}},
	}}
	r.validateLimits("limits", r.Limits, func(path, format string, args ...any) {
		t.Errorf("%s: %s", path, fmt.Sprintf(format, args...))
	})
	if !r.HasCalendar() {
		t.Error("HasCalendar is false")
	}
}
