package proxy

import (
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rules"
	"github.com/sluice-dev/sluice/internal/testing/sfv"
)

func check(policy, headers string, dryRun bool, rule string) rules.Check {
	return rules.Check{
		Policy: &rules.Policy{Name: policy, DryRun: dryRun,
			XRateLimitHeaders: headers == "XRateLimit" || headers == "Both", IETFHeaders: headers == "IETF" || headers == "Both"},
		Rule: &rules.Rule{Rule: &config.Rule{Name: rule}},
	}
}

func TestWriteLimitHeaders(t *testing.T) {
	now := time.Unix(1_800_000_000, 250_000_000)
	allowed := func(limit, remaining int64, period, reset time.Duration) limiter.Outcome {
		return limiter.Outcome{Decision: limiter.Decision{Allowed: true, Limit: limit, Remaining: remaining,
			Period: period, Reset: now.Add(reset), Now: now}}
	}
	refused := func(limit int64, period, reset, retry time.Duration) limiter.Outcome {
		return limiter.Outcome{Decision: limiter.Decision{Limit: limit, Period: period, Reset: now.Add(reset),
			RetryAfter: retry, Now: now}}
	}
	degraded := limiter.Outcome{Decision: limiter.Decision{Allowed: true, Limit: 5, Remaining: 5, Period: time.Minute,
		Reset: now, Now: now, Degraded: true}, Err: limiter.ErrRedisUnavailable}

	cases := []struct {
		name     string
		checks   []rules.Check
		outs     []limiter.Outcome
		refusing int
		want     map[string]string
	}{
		{
			name:     "one rule, both families",
			checks:   []rules.Check{check("api", "Both", false, "all")},
			outs:     []limiter.Outcome{allowed(60, 59, time.Minute, 1500*time.Millisecond)},
			refusing: -1,
			want: map[string]string{
				"X-Ratelimit-Limit": "60", "X-Ratelimit-Remaining": "59", "X-Ratelimit-Reset": "1800000002",
				"Ratelimit-Policy": `"api/all";q=60;w=60`, "Ratelimit": `"api/all";r=59;t=2`,
			},
		},
		{
			name:     "X-RateLimit describes the rule with the fewest remaining; IETF lists each",
			checks:   []rules.Check{check("api", "Both", false, "minute"), check("api", "Both", false, "hour"), check("quiet", "None", false, "x")},
			outs:     []limiter.Outcome{allowed(100, 40, time.Minute, 30*time.Second), allowed(1000, 7, time.Hour, time.Hour), allowed(1, 0, time.Second, time.Second)},
			refusing: -1,
			want: map[string]string{
				"X-Ratelimit-Limit": "1000", "X-Ratelimit-Remaining": "7", "X-Ratelimit-Reset": "1800003601",
				"Ratelimit-Policy": `"api/minute";q=100;w=60, "api/hour";q=1000;w=3600`,
				"Ratelimit":        `"api/minute";r=40;t=30, "api/hour";r=7;t=3600`,
			},
		},
		{
			name:     "refused: X-RateLimit describes the refusing rule",
			checks:   []rules.Check{check("api", "XRateLimit", false, "a"), check("api", "XRateLimit", false, "b")},
			outs:     []limiter.Outcome{allowed(10, 0, time.Second, time.Second), refused(5, time.Minute, 45*time.Second, 12*time.Second)},
			refusing: 1,
			want:     map[string]string{"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1800000046"},
		},
		{
			name:     "a failure mode's decision is left out rather than guessed",
			checks:   []rules.Check{check("api", "Both", false, "a")},
			outs:     []limiter.Outcome{degraded},
			refusing: -1,
			want:     map[string]string{},
		},
		{
			name:     "sub-second window rounds up to one second",
			checks:   []rules.Check{check("api", "IETF", false, "burst")},
			outs:     []limiter.Outcome{allowed(3, 2, 500*time.Millisecond, 200*time.Millisecond)},
			refusing: -1,
			want:     map[string]string{"Ratelimit-Policy": `"api/burst";q=3;w=1`, "Ratelimit": `"api/burst";r=2;t=1`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := http.Header{}
			writeLimitHeaders(h, tc.checks, tc.outs, tc.refusing, nil)
			got := map[string]string{}
			for k := range h {
				got[k] = h.Get(k)
			}
			g.Expect(got).To(Equal(tc.want))
			for _, k := range []string{"Ratelimit-Policy", "Ratelimit"} {
				if v := h.Get(k); v != "" {
					sfv.List(g, v)
				}
			}
		})
	}
}

func TestWriteWouldDeny(t *testing.T) {
	g := NewWithT(t)
	h := http.Header{}
	checks := []rules.Check{check("shadow", "None", true, "a"), check("shadow", "None", true, "b"), check("live", "None", false, "c")}
	outs := []limiter.Outcome{{}, {Decision: limiter.Decision{Allowed: true}}, {}}
	writeWouldDeny(h, checks, outs, nil)
	g.Expect(h.Values("X-Sluice-Would-Deny")).To(Equal([]string{"shadow/a"}))
}

func TestRefusal(t *testing.T) {
	g := NewWithT(t)
	c := check("login", "Both", false, "attempts")
	c.Policy.Failure.Mode = config.FailClosed
	p := refusal(&c, &limiter.Decision{Limit: 5, Period: 90 * time.Minute, RetryAfter: 1100 * time.Millisecond})
	g.Expect(*p).To(Equal(Problem{Type: ProblemRateLimited, Title: "Too Many Requests", Status: 429,
		Detail: "Rule attempts of policy login allows 5 requests per 1h30m. Retry in 2 s.", Policy: "login", Rule: "attempts", RetryAfter: 2}))

	p = refusal(&c, &limiter.Decision{Limit: 5, Period: time.Minute, RetryAfter: time.Second, Degraded: true})
	g.Expect(p.Status).To(Equal(503))
	g.Expect(p.Type).To(Equal(ProblemLimiterUnavailable))
	g.Expect(p.RetryAfter).To(Equal(int64(1)))

	c.Policy.Failure.Mode = config.FailLocal
	p = refusal(&c, &limiter.Decision{Limit: 2, Period: time.Second, RetryAfter: 300 * time.Millisecond, Degraded: true})
	g.Expect(p.Status).To(Equal(429), "a local fallback refusal is a rate limit")
	g.Expect(p.RetryAfter).To(Equal(int64(1)))
}
