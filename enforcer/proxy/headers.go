package proxy

import (
	"net/http"
	"strconv"

	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/ratelimitheaders"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// Response header names, in canonical form; the rate limit ones are
// rendered by enforcer/ratelimitheaders, which the rate limit service
// shares.
const (
	headerLimit      = ratelimitheaders.Limit
	headerRemaining  = ratelimitheaders.Remaining
	headerReset      = ratelimitheaders.Reset
	headerDebt       = ratelimitheaders.Debt
	headerPolicy     = ratelimitheaders.Policy
	headerRateLimit  = ratelimitheaders.RateLimit
	headerWouldDeny  = "X-Sluice-Would-Deny"
	headerRetryAfter = ratelimitheaders.RetryAfter
)

// reported says whether an outcome may be described in headers: only a
// decision Redis made. A failure mode's decision (Degraded) does not know
// the count shared by every replica, so the headers leave that rule out
// rather than guess; an invalid request has no decision at all.
func reported(o *limiter.Outcome) bool { return o.Err == nil }

// writeLimitHeaders describes the checks' decisions in h, as each check's
// policy asks:
//
//   - X-RateLimit-Limit, -Remaining, -Reset describe one rule: the refusing
//     one when the request is refused (refusing >= 0), else the one with the
//     fewest requests remaining. X-RateLimit-Debt joins them when that
//     rule's answers took its tenant below empty (responseCost).
//   - RateLimit-Policy and RateLimit list every rule, each named
//     "<policy>/<rule>", with the deciding window of its decision.
//
// buf is scratch space, returned for reuse. All values are built in it and
// then share one string and one []string backing array: two allocations
// whatever the number of headers.
func writeLimitHeaders(h http.Header, checks []rules.Check, outs []limiter.Outcome, refusing int, buf []byte) []byte {
	var fields fieldSet
	b := buf[:0]
	pick := -1
	if refusing >= 0 && checks[refusing].Policy.XRateLimitHeaders && reported(&outs[refusing]) {
		pick = refusing
	}
	start := len(b)
	for i := range checks {
		c, o := &checks[i], &outs[i]
		if !reported(o) {
			continue
		}
		if refusing < 0 && c.Policy.XRateLimitHeaders && (pick < 0 || o.Decision.Remaining < outs[pick].Decision.Remaining) {
			pick = i
		}
		if c.Policy.IETFHeaders {
			if len(b) > start {
				b = append(b, ',', ' ')
			}
			if c.Request.Algorithm == limiter.Concurrency {
				b = ratelimitheaders.AppendConcurrencyPolicyItem(b, c.Policy.Name, c.Rule.Name, o.Decision.Limit)
			} else {
				// a bucket's quota is its burst, over the time it takes to refill
				w := o.Decision.Period
				if ws := c.Request.Windows; len(ws) > 0 {
					w = ratelimitheaders.BucketWindow(o.Decision.Limit, ws[min(o.Decision.Window, len(ws)-1)].Requests, w)
				}
				b = ratelimitheaders.AppendPolicyItem(b, c.Policy.Name, c.Rule.Name, o.Decision.Limit, w)
			}
		}
	}
	if len(b) > start {
		fields.add(headerPolicy, start, len(b))
		start = len(b)
		for i := range checks {
			c, o := &checks[i], &outs[i]
			if reported(o) && c.Policy.IETFHeaders {
				if len(b) > start {
					b = append(b, ',', ' ')
				}
				b = ratelimitheaders.AppendRateLimitItem(b, c.Policy.Name, c.Rule.Name, o.Decision.Remaining, o.Decision.Reset.Sub(o.Decision.Now))
			}
		}
		fields.add(headerRateLimit, start, len(b))
	}
	if pick >= 0 {
		d := &outs[pick].Decision
		start = len(b)
		b = strconv.AppendInt(b, d.Limit, 10)
		fields.add(headerLimit, start, len(b))
		start = len(b)
		b = strconv.AppendInt(b, d.Remaining, 10)
		fields.add(headerRemaining, start, len(b))
		start = len(b)
		b = strconv.AppendInt(b, ratelimitheaders.CeilUnix(d.Reset), 10)
		fields.add(headerReset, start, len(b))
		if d.Debt > 0 {
			start = len(b)
			b = strconv.AppendInt(b, d.Debt, 10)
			fields.add(headerDebt, start, len(b))
		}
	}
	fields.set(h, b)
	return b
}

// fieldSet collects header values as ranges of one buffer.
type fieldSet struct {
	n    int
	keys [6]string
	ends [6][2]int
}

func (f *fieldSet) add(key string, start, end int) {
	f.keys[f.n], f.ends[f.n] = key, [2]int{start, end}
	f.n++
}

// set puts the values into h, sharing one string and one slice.
func (f *fieldSet) set(h http.Header, b []byte) {
	if f.n == 0 {
		return
	}
	all := string(b)
	vals := make([]string, f.n)
	for i := range f.n {
		vals[i] = all[f.ends[i][0]:f.ends[i][1]]
		h[f.keys[i]] = vals[i : i+1 : i+1]
	}
}

// writeWouldDeny names, in X-Sluice-Would-Deny, the DryRun rules that would
// have refused the request.
func writeWouldDeny(h http.Header, checks []rules.Check, outs []limiter.Outcome, buf []byte) []byte {
	b := buf[:0]
	for i := range checks {
		if checks[i].Policy.DryRun && refuses(&outs[i]) {
			b = ratelimitheaders.AppendListSep(b)
			b = append(b, checks[i].Policy.Name...)
			b = append(b, '/')
			b = append(b, checks[i].Rule.Name...)
		}
	}
	if len(b) > 0 {
		h[headerWouldDeny] = []string{string(b)}
	}
	return b
}
