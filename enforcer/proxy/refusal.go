package proxy

import (
	"fmt"
	"net/http"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/overload"
	"github.com/sluice-dev/sluice/enforcer/ratelimitheaders"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// refusal is the problem answering a request that check c refused with d:
// 503 when a fail-closed policy could not reach Redis, else 429.
func refusal(c *rules.Check, d *limiter.Decision) *Problem {
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
	per := config.FormatPeriod(d.Period)
	if d.Calendar != nil {
		per = d.Calendar.String()
	}
	p.Detail = fmt.Sprintf("Rule %s of policy %s allows %d requests per %s. Retry in %d s.",
		c.Rule.Name, c.Policy.Name, d.Limit, per, retry)
	if c.Rule.ResponseCost != nil {
		p.Detail = budgetDetail(c, d, per, retry)
		p.Debt = d.Debt
	}
	if f := c.Scaling.Factor(); f < config.Full {
		p.Detail += adaptiveNote(f)
	}
	return p
}

// budgetDetail is the refusal of a rule whose answers report their cost:
// its limit is in the units they report, and a tenant refused while it owes
// is told what it owes.
func budgetDetail(c *rules.Check, d *limiter.Decision, per string, retry int64) string {
	detail := fmt.Sprintf("Rule %s of policy %s allows %d units per %s, as the application's answers report them.",
		c.Rule.Name, c.Policy.Name, d.Limit, per)
	if d.Debt > 0 {
		return detail + fmt.Sprintf(" The tenant owes %d units, charged for answers that cost more than the room they were admitted on, and is refused until they are paid back. Retry in %d s.",
			d.Debt, retry)
	}
	return detail + fmt.Sprintf(" A request needs %d units of room up front, and fewer are left. Retry in %d s.", c.Request.Cost, retry)
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
