package enforcer

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// calendarBoundary is a calendar quota crossing one boundary: the window
// that holds the local date before, and the one after it.
type calendarBoundary struct {
	name string
	unit string // Day, Month or Year
	zone string
	// before is a local date in the window that ends at the boundary.
	year  int
	month time.Month
	day   int
}

// windows are the window holding the case's date and the next one, computed
// here with the time package alone: a day is local midnight to the next
// local midnight, a month the 1st to the next 1st, a year 1 January to the
// next.
func (c calendarBoundary) windows(t *testing.T) (start, boundary, next time.Time) {
	loc, err := time.LoadLocation(c.zone)
	if err != nil {
		t.Fatal(err)
	}
	at := func(i int) time.Time {
		switch c.unit {
		case "Day":
			return time.Date(c.year, c.month, c.day+i, 0, 0, 0, 0, loc)
		case "Month":
			return time.Date(c.year, c.month+time.Month(i), 1, 0, 0, 0, 0, loc)
		case "Year":
			return time.Date(c.year+i, time.January, 1, 0, 0, 0, 0, loc)
		}
		t.Fatalf("unit %q", c.unit)
		return time.Time{}
	}
	return at(0), at(1), at(2)
}

// The enforcer keeps the machine's clock while each Redis' clock is moved
// with libfaketime to a few seconds before a calendar boundary, months
// after the machine's now (and once before it): Redis' TIME alone decides
// the window, the enforcer's proposal is corrected. A
// FixedWindow calendar quota admits its requests, refuses the next one
// until the true boundary in its zone (X-RateLimit-Reset, Retry-After,
// RateLimit t=), with w= the length of the window ending there, and once
// Redis' clock passes the boundary admits again, with w= the new window's
// length: 23 and 25 hours on the days of daylight-saving changes, 29 days
// in a leap February, 366 days in a leap year.
func TestCalendarQuotaAcrossRealBoundariesOnRedisClock(t *testing.T) {
	cases := []calendarBoundary{
		{"Berlin into the 23h day", "Day", "Europe/Berlin", 2027, time.March, 27},
		{"Berlin out of the 23h day", "Day", "Europe/Berlin", 2027, time.March, 28},
		{"Berlin into the 25h day", "Day", "Europe/Berlin", 2027, time.October, 30},
		{"Berlin out of the 25h day", "Day", "Europe/Berlin", 2027, time.October, 31},
		{"New York into the 23h day", "Day", "America/New_York", 2027, time.March, 13},
		{"New York out of the 23h day", "Day", "America/New_York", 2027, time.March, 14},
		{"New York into the 25h day", "Day", "America/New_York", 2027, time.November, 6},
		{"New York out of the 25h day", "Day", "America/New_York", 2027, time.November, 7},
		{"Sydney January into leap February", "Month", "Australia/Sydney", 2028, time.January, 31},
		{"Berlin leap February into March", "Month", "Europe/Berlin", 2028, time.February, 29},
		{"Kolkata 2027 into leap 2028", "Year", "Asia/Kolkata", 2027, time.December, 31},
		{"Auckland 2025 into 2026, Redis behind the enforcer", "Year", "Pacific/Auckland", 2025, time.December, 31},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			crossCalendarBoundary(t, c)
		})
	}
}

// lead is how long before the boundary each Redis' clock starts: time to
// start an enforcer and send a few requests on a busy machine.
const lead = 8 * time.Second

func crossCalendarBoundary(t *testing.T, c calendarBoundary) {
	g := NewWithT(t)
	from, boundary, next := c.windows(t)
	oldLength, newLength := boundary.Sub(from), next.Sub(boundary)
	t.Logf("window %s .. %s (%s), then .. %s (%s)", from, boundary, oldLength, next, newLength)

	srv := redistest.Start(t, redistest.WithClockAt(boundary.Add(-lead)))
	rdb := srv.Client()
	redisNow := func() time.Time {
		now, err := rdb.Time(context.Background()).Result()
		g.Expect(err).NotTo(HaveOccurred())
		return now
	}
	const requests = 3
	e := start(t, setup{redisURL: srv.URL(), policies: policy("quota", fmt.Sprintf(`  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: plan
      algorithm: FixedWindow
      limits:
        - {requests: %d, calendar: {unit: %s, timeZone: %s}}`, requests, c.unit, c.zone))})
	tenant := tenantOf(t, "acme")
	policyHeader := func(length time.Duration) string {
		return fmt.Sprintf(`"quota/plan";q=%d;w=%d`, requests, int64(length/time.Second))
	}
	// untilWithin checks a header's seconds against the time from Redis'
	// now, read just before the request, to end: within a second.
	untilWithin := func(what string, seconds int64, before, end time.Time) {
		want := end.Sub(before).Seconds()
		g.Expect(float64(seconds)).To(BeNumerically("~", want, 1), "%s: %d s, want %.1f s to %s", what, seconds, want, end)
	}
	rateLimitT := func(r response) int64 {
		m := regexp.MustCompile(`^"quota/plan";r=\d+;t=(\d+)$`).FindStringSubmatch(r.header.Get("RateLimit"))
		g.Expect(m).NotTo(BeNil(), "RateLimit: %q", r.header.Get("RateLimit"))
		secs, _ := strconv.ParseInt(m[1], 10, 64)
		return secs
	}

	for i := range requests {
		before := redisNow()
		g.Expect(before).To(BeTemporally("<", boundary), "the enforcer took longer than %s to start", lead)
		r := get(t, e.url+"/v1/orders", tenant)
		g.Expect(r.status).To(Equal(200), "request %d of %d: %s", i+1, requests, r.body)
		g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal(strconv.Itoa(requests - 1 - i)))
		g.Expect(r.header.Get("X-RateLimit-Reset")).To(Equal(strconv.FormatInt(boundary.Unix(), 10)), "the Unix second of the boundary")
		g.Expect(r.header.Get("RateLimit-Policy")).To(Equal(policyHeader(oldLength)), "w= is the current window's length")
		untilWithin("RateLimit t=", rateLimitT(r), before, boundary)
	}

	// a calendar rule neither leases nor caches refusals: every refusal
	// is Redis', and each tells the time left to the boundary
	for _, which := range []string{"first", "second"} {
		before := redisNow()
		r := get(t, e.url+"/v1/orders", tenant)
		g.Expect(redisNow()).To(BeTemporally("<", boundary), "the boundary passed before the refusal could be checked")
		g.Expect(r.status).To(Equal(429), "%s request over the quota", which)
		p := refusal(g, r)
		g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal("0"))
		g.Expect(r.header.Get("X-RateLimit-Reset")).To(Equal(strconv.FormatInt(boundary.Unix(), 10)), which)
		g.Expect(r.header.Get("RateLimit-Policy")).To(Equal(policyHeader(oldLength)), which)
		untilWithin(which+" refusal's Retry-After", p.RetryAfter, before, boundary)
		untilWithin(which+" refusal's RateLimit t=", rateLimitT(r), before, boundary)
	}

	// on Redis' clock past the boundary: the new window admits
	g.Eventually(redisNow, lead+5*time.Second, 50*time.Millisecond).Should(BeTemporally(">=", boundary))
	before := redisNow()
	r := get(t, e.url+"/v1/orders", tenant)
	g.Expect(r.status).To(Equal(200), "the next window admits: %s", r.body)
	g.Expect(r.header.Get("X-RateLimit-Remaining")).To(Equal(strconv.Itoa(requests - 1)))
	g.Expect(r.header.Get("X-RateLimit-Reset")).To(Equal(strconv.FormatInt(next.Unix(), 10)), "the Unix second the new window ends")
	g.Expect(r.header.Get("RateLimit-Policy")).To(Equal(policyHeader(newLength)), "w= is the new window's length")
	untilWithin("RateLimit t=", rateLimitT(r), before, next)
}
