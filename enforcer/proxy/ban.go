package proxy

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// BanProblem is the extension member of a ProblemBanned answer: until when
// the tenant is banned, and why.
type BanProblem struct {
	// Until is when the ban ends (RFC 3339).
	Until time.Time `json:"until"`
	// Level is 1 for a first ban, 2 for the next within the rule's
	// forgetAfter, and so on.
	Level int64 `json:"level"`
	// Denials refusals within Within started it.
	Denials int64  `json:"denials"`
	Within  string `json:"within"`
}

// banned is p, for check c, as the answer to a tenant that d says is banned.
func banned(p *Problem, c *rules.Check, d *limiter.Decision) *Problem {
	b := d.Ban
	p.Type, p.Status, p.Title = ProblemBanned, http.StatusTooManyRequests, "Banned"
	p.Ban = &BanProblem{Until: b.Until.UTC().Truncate(time.Second), Level: b.Level, Denials: b.Denials, Within: config.FormatPeriod(b.Within)}
	p.Detail = fmt.Sprintf("Rule %s of policy %s refused %d requests of this client within %s, so it is banned from the rule until %s (ban level %d). Retry in %d s.",
		c.Rule.Name, c.Policy.Name, b.Denials, config.FormatPeriod(b.Within), b.Until.UTC().Format(time.RFC3339), b.Level, p.RetryAfter)
	return p
}
