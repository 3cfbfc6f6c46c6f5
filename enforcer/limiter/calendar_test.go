package limiter

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// Redis' TIME is the one clock of calendar windows: the enforcer's own
// clock only proposes a window, which the script checks. These tests move
// the enforcer's clock (Redis.now) away from Redis' and put a window's
// boundary a few seconds after Redis' real now, with a zone of a chosen
// offset; the arithmetic of the zones themselves (daylight-saving days,
// month and year ends) is tested in enforcer/config.

// calendarRequest is a checked FixedWindow request of one calendar window.
func calendarRequest(t *testing.T, c *config.Calendar, requests int64, opts ...ruleOption) Request {
	t.Helper()
	b := bucketFor(t)
	rule, err := newRule(b, FixedWindow, []Window{{Requests: requests, Calendar: c}}, 1, FailurePolicy{Mode: config.FailClosed, Timeout: 5 * time.Second}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rule.Request(b.Tenant)
}

// redisNow is Redis' TIME.
func redisNow(t *testing.T, url string) time.Time {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		// a cluster URL: any node tells the time
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
		defer c.Close()
		now, err := c.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now
	}
	c := redis.NewClient(opts)
	defer c.Close()
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestCalendarWindowFollowsRedisClockNotTheEnforcers(t *testing.T) {
	month := config.CalendarIn(config.CalendarMonth, time.UTC)
	for name, url := range topologies() {
		for _, skew := range []time.Duration{-40 * 24 * time.Hour, 40 * 24 * time.Hour} {
			t.Run(name+"/enforcer off by "+skew.String(), func(t *testing.T) {
				ctx := ctxFor(t)
				wrong := newRedis(t, url)
				wrong.now = func() time.Time { return time.Now().Add(skew) }
				right := newRedis(t, url)
				req := calendarRequest(t, month, 5)

				d, err := wrong.Allow(ctx, req)
				if err != nil {
					t.Fatalf("a stale window is computed again at Redis' time, not an error: %v", err)
				}
				_, end := month.Window(d.Now)
				if !d.Allowed || d.Remaining != 4 || !d.Reset.Equal(end) {
					t.Fatalf("decision %+v: want admitted, 4 remaining, reset at the month's end %s", d, end)
				}
				if start, end := month.Window(d.Now); d.Period != end.Sub(start) {
					t.Errorf("period %s, want the current month's length %s", d.Period, end.Sub(start))
				}
				// the enforcer with the right clock counts in the same window
				d, err = right.Allow(ctx, req)
				if err != nil || !d.Allowed || d.Remaining != 3 {
					t.Fatalf("second enforcer: %+v, %v: want 3 remaining in the same window", d, err)
				}
			})
		}
	}
}

func TestCalendarKeyCarriesTheWindowStartAndExpiresAfterItsEnd(t *testing.T) {
	ctx := ctxFor(t)
	r := newRedis(t, standalone.URL())
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	day := config.CalendarIn(config.CalendarDay, berlin)
	req := calendarRequest(t, day, 5)
	d, err := r.Allow(ctx, req)
	if err != nil || !d.Allowed {
		t.Fatalf("%+v, %v", d, err)
	}
	start, end := day.Window(d.Now)
	key := string(appendCalendarLabel(req.Bucket.appendKeyPrefix(nil, FixedWindow), day, start.UnixMilli()))
	ttl, err := standalone.Client().PTTL(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if left := end.Sub(d.Now); ttl < left-time.Second || ttl > left+time.Second {
		t.Fatalf("key %s expires in %s, want at the day's end in Berlin, %s from now", key, ttl, left)
	}
}

// zoneWithMidnightIn is a fixed zone whose next midnight comes in after
// Redis' now, with that midnight.
func zoneWithMidnightIn(t *testing.T, url string, in time.Duration) (*time.Location, time.Time) {
	now := redisNow(t, url)
	midnight := now.Add(in).Truncate(time.Second)
	// local = UTC + offset: midnight is a whole day in local time
	offset := (86400 - midnight.Unix()%86400) % 86400
	loc := time.FixedZone("Test/Midnight", int(offset))
	if h, m, s := midnight.In(loc).Clock(); h != 0 || m != 0 || s != 0 {
		t.Fatalf("midnight %s is not local midnight", midnight.In(loc))
	}
	return loc, midnight
}

func TestCalendarDayResetsAtLocalMidnightOnRedisClock(t *testing.T) {
	ctx := ctxFor(t)
	url := standalone.URL()
	const margin = 8 * time.Second
	loc, midnight := zoneWithMidnightIn(t, url, margin)
	day := config.CalendarIn(config.CalendarDay, loc)
	r := newRedis(t, url)
	req := calendarRequest(t, day, 3)

	// before midnight on Redis' clock, an enforcer that believes it is the
	// next day still counts into today's window: no over-admission
	r.now = func() time.Time { return midnight.Add(time.Minute) }
	for i := range 3 {
		if d, err := r.Allow(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
	}
	d, err := r.Allow(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if now := redisNow(t, url); !now.Before(midnight) {
		t.Skipf("the machine took %s over four requests; midnight passed before the refusal could be checked", margin)
	}
	if d.Allowed || !d.Reset.Equal(midnight) || d.RetryAfter <= 0 || d.RetryAfter > margin {
		t.Fatalf("fourth request: %+v: want refused until local midnight %s", d, midnight)
	}

	// after midnight on Redis' clock, an enforcer still on yesterday is
	// corrected: the new day's window admits
	for redisNow(t, url).Before(midnight) {
		time.Sleep(100 * time.Millisecond)
	}
	r.now = func() time.Time { return midnight.Add(-time.Minute) }
	d, err = r.Allow(ctx, req)
	if err != nil || !d.Allowed || d.Remaining != 2 {
		t.Fatalf("after midnight: %+v, %v: want admitted with 2 remaining in the new day", d, err)
	}
	if want := midnight.Add(24 * time.Hour); !d.Reset.Equal(want) {
		t.Errorf("reset %s, want the next midnight %s", d.Reset, want)
	}
}

func TestCalendarTwoEnforcersNeverOverAdmitAMonthlyQuota(t *testing.T) {
	ctx := ctxFor(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	month := config.CalendarIn(config.CalendarMonth, berlin)
	a, b := newRedis(t, standalone.URL()), newRedis(t, standalone.URL())
	b.now = func() time.Time { return time.Now().AddDate(0, -1, 0) } // a month behind: every call is corrected
	req := calendarRequest(t, month, 150)

	var admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 400 {
		r := a
		if i%2 == 1 {
			r = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := r.Allow(ctx, req)
			if err != nil {
				errs <- err
				return
			}
			if d.Allowed {
				admitted.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := admitted.Load(); got != 150 {
		t.Fatalf("two enforcers admitted %d of a monthly quota of 150", got)
	}
}

func TestCalendarWindowsWithABanAndARefund(t *testing.T) {
	ctx := ctxFor(t)
	day := config.CalendarIn(config.CalendarDay, time.UTC)
	r := newRedis(t, standalone.URL())
	r.now = func() time.Time { return time.Now().AddDate(0, 0, -3) }
	req := calendarRequest(t, day, 2, withBan(&banSpec{Denials: 5, Within: time.Minute, Durations: []time.Duration{time.Minute}, ForgetAfter: time.Hour}))
	d, err := r.Allow(ctx, req)
	if err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("a rule with a ban corrects a stale window too: %+v, %v", d, err)
	}
	if err := r.Refund(ctx, []Request{req}, []time.Time{d.CountedAt}); err != nil {
		t.Fatal(err)
	}
	d, err = r.Allow(ctx, req)
	if err != nil || !d.Allowed || d.Remaining != 1 {
		t.Fatalf("after the refund: %+v, %v: want the refunded unit back", d, err)
	}
}

func TestCalendarRulesDoNotLease(t *testing.T) {
	req := calendarRequest(t, config.CalendarIn(config.CalendarMonth, time.UTC), 1000)
	if req.f.lease {
		t.Fatal("a calendar rule leases: a lease or a cached refusal would have to end exactly at the window's end")
	}
}

func TestCalendarLocalFallbackCountsTheSameWindows(t *testing.T) {
	loc := time.FixedZone("Test/Local", 3600)
	day := config.CalendarIn(config.CalendarDay, loc)
	midnight := time.Date(2026, 3, 10, 0, 0, 0, 0, loc)
	now := midnight.Add(-time.Second)
	l := NewLocal(func() time.Time { return now })
	req := calendarRequest(t, day, 2)
	for range 2 {
		if ok, _, _ := l.Check(&req); !ok {
			t.Fatal("refused within the quota")
		}
	}
	ok, _, res := l.Check(&req)
	if ok || !res[0].Reset.Equal(midnight) || res[0].Retry != time.Second {
		t.Fatalf("third: allowed %v, %+v: want refused for the second left before local midnight", ok, res[0])
	}
	now = midnight
	if ok, _, res := l.Check(&req); !ok || res[0].Remaining != 1 {
		t.Fatalf("at local midnight: allowed %v, %+v: want a new day", ok, res[0])
	}
}

// TestCalendarBoundariesOnAMovedClock moves the local fallback's clock
// across daylight-saving midnights, month ends and a year end: the quota
// resets at the window's true start, and the decision reports the length
// of the window it counts in.
func TestCalendarBoundariesOnAMovedClock(t *testing.T) {
	load := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	berlin, newYork := load("Europe/Berlin"), load("America/New_York")
	cases := []struct {
		name          string
		unit          config.CalendarUnit
		boundary      time.Time
		before, after time.Duration // lengths of the windows either side
	}{
		{"Berlin, into the 23h day", config.CalendarDay, time.Date(2026, 3, 29, 0, 0, 0, 0, berlin), 24 * time.Hour, 23 * time.Hour},
		{"Berlin, out of the 23h day", config.CalendarDay, time.Date(2026, 3, 30, 0, 0, 0, 0, berlin), 23 * time.Hour, 24 * time.Hour},
		{"Berlin, into the 25h day", config.CalendarDay, time.Date(2026, 10, 25, 0, 0, 0, 0, berlin), 24 * time.Hour, 25 * time.Hour},
		{"New York, into the 23h day", config.CalendarDay, time.Date(2026, 3, 8, 0, 0, 0, 0, newYork), 24 * time.Hour, 23 * time.Hour},
		{"New York, out of the 25h day", config.CalendarDay, time.Date(2026, 11, 2, 0, 0, 0, 0, newYork), 25 * time.Hour, 24 * time.Hour},
		{"Jan 31 to Feb 1", config.CalendarMonth, time.Date(2026, 2, 1, 0, 0, 0, 0, berlin), 31 * 24 * time.Hour, 28 * 24 * time.Hour},
		{"Feb 28 to Mar 1", config.CalendarMonth, time.Date(2026, 3, 1, 0, 0, 0, 0, newYork), 28 * 24 * time.Hour, 31*24*time.Hour - time.Hour},
		{"Feb 29 to Mar 1", config.CalendarMonth, time.Date(2028, 3, 1, 0, 0, 0, 0, berlin), 29 * 24 * time.Hour, 31*24*time.Hour - time.Hour},
		{"a year end", config.CalendarYear, time.Date(2027, 1, 1, 0, 0, 0, 0, newYork), 365 * 24 * time.Hour, 365 * 24 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := config.CalendarIn(tc.unit, tc.boundary.Location())
			now := tc.boundary.Add(-time.Second)
			l := NewLocal(func() time.Time { return now })
			req := calendarRequest(t, c, 2)
			check := func() Decision {
				allowed, at, res := l.Check(&req)
				return decide(&req, allowed, at, res)
			}
			for range 2 {
				if d := check(); !d.Allowed {
					t.Fatalf("refused within the quota: %+v", d)
				}
			}
			d := check()
			if d.Allowed || !d.Reset.Equal(tc.boundary) || d.RetryAfter != time.Second || d.Period != tc.before {
				t.Fatalf("a second before %s: %+v: want refused for 1s, period %s", tc.boundary, d, tc.before)
			}
			now = tc.boundary
			d = check()
			if !d.Allowed || d.Remaining != 1 || d.Period != tc.after {
				t.Fatalf("at %s: %+v: want a new window of %s", tc.boundary, d, tc.after)
			}
		})
	}
}

// BenchmarkCalendarCommand is the cost of building one decision's command
// for a monthly window in Berlin next to a 1m period: the window's bounds
// and key are computed per call.
func BenchmarkCalendarCommand(b *testing.B) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range []Window{{Requests: 100, Period: time.Minute}, {Requests: 100, Calendar: config.CalendarIn(config.CalendarMonth, berlin)}} {
		name := "period"
		if w.Calendar != nil {
			name = "calendar"
		}
		b.Run(name, func(b *testing.B) {
			req := Request{Algorithm: FixedWindow, Cost: 1, Windows: []Window{w},
				Bucket: Bucket{Namespace: "bench", Policy: "p", Rule: "r", Tenant: HashTenant("salt", "t")}}
			at := time.Now().UnixMicro()
			b.ReportAllocs()
			for b.Loop() {
				evalSHA(&req, 1, 1, at)
			}
		})
	}
}
