package proxy

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/overload"
	"github.com/sluice-dev/sluice/enforcer/ratelimitheaders"
	"github.com/sluice-dev/sluice/enforcer/route"
)

// refusal is the problem answering a request that check c refused with d:
// 503 when a fail-closed policy could not reach Redis, else 429.
func refusal(c *route.Check, d *limiter.Decision) *Problem {
	retry := ratelimitheaders.RetryAfterSeconds(d.RetryAfter)
	p := &Problem{Policy: c.Policy.Name, Rule: c.Rule.Name, RetryAfter: retry}
	if d.Ban.Active() {
		return banned(p, c, d)
	}
	if d.Degraded && c.Policy.Failure.Mode == config.FailClosed {
		p.Type, p.Status, p.Title = ProblemLimiterUnavailable, http.StatusServiceUnavailable, "Rate limiter unavailable"
		p.Detail = fmt.Sprintf("Policy %s cannot check rule %s because its rate limit store is unavailable, and it refuses requests until it is back. Retry in %d s.",
			c.Policy.Name, c.Rule.Name, retry)
		return p
	}
	p.Type, p.Status, p.Title = ProblemRateLimited, http.StatusTooManyRequests, "Too Many Requests"
	if c.Request.Algorithm == limiter.Concurrency {
		p.Detail = fmt.Sprintf("Rule %s of policy %s allows %d requests in flight at once. Retry in %d s.",
			c.Rule.Name, c.Policy.Name, d.Limit, retry)
		return p
	}
	per := formatPeriod(d.Period)
	if d.Calendar != nil {
		per = d.Calendar.String()
	}
	p.Detail = fmt.Sprintf("Rule %s of policy %s allows %d requests per %s. Retry in %d s.",
		c.Rule.Name, c.Policy.Name, d.Limit, per, retry)
	if f := c.Scaling.Factor(); f < config.Full {
		p.Detail += adaptiveNote(f)
	}
	return p
}

// formatPeriod writes a window's period as people write it: "1m", "24h",
// "1h30m", "500ms".
func formatPeriod(d time.Duration) string {
	if d <= 0 || d%time.Second != 0 {
		return d.String()
	}
	var out string
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.unit; n > 0 {
			out += strconv.FormatInt(int64(n), 10) + u.name
			d -= n * u.unit
		}
	}
	return out
}

// adaptiveNote tells a refused client that the limit is scaled down.
func adaptiveNote(f config.BasisPoints) string {
	return " The limit is at " + f.String() + " of its configured value while the application is over its health targets."
}

// overloaded is the 503 of a request refused for want of room.
func overloaded(reason string) *Problem {
	detail := "the enforcer holds as many requests as its memory allows; retry shortly"
	if reason == overload.ShedTenant {
		detail = "this tenant has as many requests in flight as one tenant may; retry when some have ended"
	}
	return &Problem{Type: ProblemOverloaded, Title: "Enforcer overloaded", Status: http.StatusServiceUnavailable,
		Detail: detail, RetryAfter: 1}
}
