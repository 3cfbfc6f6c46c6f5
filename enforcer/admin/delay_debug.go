package admin

import (
	"math"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// WaitingSource is the proxy's view of its delay queue (its handler).
type WaitingSource interface {
	Waiting(b limiter.Bucket) (n int, latest time.Time)
}

// reservationsOf reads the reservations of a peeked decision d of a delay
// rule: its window win is whole at d.Reset and holds nothing a capacity's
// refill before; any later time is booked ahead.
func (s *Server) reservationsOf(req limiter.Request, d limiter.Decision, win config.Limit) *debugapi.Reservations {
	if req.Delay == 0 {
		return nil
	}
	out := &debugapi.Reservations{}
	capacity := win.Burst
	if capacity == 0 {
		capacity = win.Requests
	}
	period := win.Period.Duration
	empty := d.Reset.Add(-time.Duration(float64(capacity) * float64(period) / float64(win.Requests)))
	if ahead := empty.Sub(d.Now); ahead > 0 {
		out.Booked = int64(math.Ceil(ahead.Seconds()*float64(win.Requests)/period.Seconds() - 1e-6))
		out.Until = &empty
	}
	if s.opts.Waiting != nil {
		var latest time.Time
		if out.Waiting, latest = s.opts.Waiting.Waiting(req.Bucket); !latest.IsZero() {
			out.LatestSlot = &latest
		}
	}
	return out
}
