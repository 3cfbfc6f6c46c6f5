package limiter

import "time"

// clock is the time of a Guard's local state (leases, cached decisions,
// traffic): nanoseconds since the clock's start, read once per request and
// shared by every table, so that a request's times compare. Production
// reads the monotonic clock (monotonic), so that a wall clock set back
// never makes a lease or a cached refusal outlive its end; tests move a
// clock of their own by hand instead of sleeping.
type clock interface {
	// now is the time in nanoseconds since the clock's start.
	now() int64
	// wall is a reading of now as a time.Time, to date local decisions.
	wall(at int64) time.Time
}

// monotonic is the clock of production: the monotonic time since base.
type monotonic struct{ base time.Time }

func newMonotonic() *monotonic { return &monotonic{base: time.Now()} }

func (m *monotonic) now() int64 { return int64(time.Since(m.base)) }

func (m *monotonic) wall(at int64) time.Time { return m.base.Add(time.Duration(at)) }
