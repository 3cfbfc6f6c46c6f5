package rls

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http/httpguts"

	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/ratelimitheaders"
)

// envoyproxy/ratelimit's default names of its three headers (its settings
// LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER).
const (
	DefaultERLLimitHeader     = "RateLimit-Limit"
	DefaultERLRemainingHeader = "RateLimit-Remaining"
	DefaultERLResetHeader     = "RateLimit-Reset"
)

// The names of the headers the enforcer writes, spelled as documented;
// Envoy sends them in lower case over HTTP/2.
const (
	headerXLimit     = "X-RateLimit-Limit"
	headerXRemaining = "X-RateLimit-Remaining"
	headerXReset     = "X-RateLimit-Reset"
	headerPolicy     = "RateLimit-Policy"
	headerRateLimit  = "RateLimit"
	headerRetryAfter = "Retry-After"
)

// ResponseHeaders says which rate limit headers a response asks Envoy to
// add to its answer to the client (response_headers_to_add), which Envoy
// adds to an admitted request's response and to its 429 alike. The zero
// value adds none, as envoyproxy/ratelimit by default.
type ResponseHeaders struct {
	// ERL adds envoyproxy/ratelimit's three headers
	// (LIMIT_RESPONSE_HEADERS_ENABLED), as it writes them
	// (src/service/ratelimit.go): of the descriptor closest to its limit
	// (the last refused one, if any), its limit's requests_per_unit, what
	// it has left, and the seconds until its window resets. Names default
	// to ERL's (DefaultERLLimitHeader...).
	ERL                              bool
	ERLLimit, ERLRemaining, ERLReset string
	// XRateLimit adds X-RateLimit-Limit, -Remaining and -Reset (Unix
	// seconds) of the same descriptor, as the enforcer writes them.
	XRateLimit bool
	// IETF adds RateLimit-Policy and RateLimit
	// (draft-ietf-httpapi-ratelimit-headers), an item per decided
	// descriptor named "<domain>/<rule>", as the enforcer writes them.
	IETF bool
}

// Enabled reports whether any header is added.
func (h *ResponseHeaders) Enabled() bool { return h != nil && (h.ERL || h.XRateLimit || h.IETF) }

// names are the headers h adds, ERL's with their defaults filled.
func (h ResponseHeaders) names() []string {
	var out []string
	if h.ERL {
		out = append(out, cmpOr(h.ERLLimit, DefaultERLLimitHeader), cmpOr(h.ERLRemaining, DefaultERLRemainingHeader), cmpOr(h.ERLReset, DefaultERLResetHeader))
	}
	if h.XRateLimit {
		out = append(out, headerXLimit, headerXRemaining, headerXReset)
	}
	if h.IETF {
		out = append(out, headerPolicy, headerRateLimit)
	}
	if len(out) > 0 {
		out = append(out, headerRetryAfter)
	}
	return out
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Validate reports a header name that is not a valid field name, or one
// that two of the enabled headers share.
func (h ResponseHeaders) Validate() error {
	seen := map[string]bool{}
	for _, n := range h.names() {
		if !httpguts.ValidHeaderFieldName(n) {
			return fmt.Errorf("header name %q is not a valid HTTP field name", n)
		}
		if seen[strings.ToLower(n)] {
			return fmt.Errorf("header %s would be written twice", n)
		}
		seen[strings.ToLower(n)] = true
	}
	return nil
}

// SetResponseHeaders says which headers responses ask Envoy to add from
// now on.
func (s *Service) SetResponseHeaders(h ResponseHeaders) {
	if h.ERL {
		h.ERLLimit, h.ERLRemaining, h.ERLReset = cmpOr(h.ERLLimit, DefaultERLLimitHeader),
			cmpOr(h.ERLRemaining, DefaultERLRemainingHeader), cmpOr(h.ERLReset, DefaultERLResetHeader)
	}
	s.headers.Store(&h)
}

// report is a descriptor a limit decided, as the response describes it.
type report struct {
	rule *Rule
	// window is the deciding window, decision its decision.
	window   limiter.Window
	decision limiter.Decision
	status   *ratelimitv3.RateLimitResponse_DescriptorStatus
	refused  bool
}

// render is the headers of a response with code whose descriptors
// reports describe, nil when none are enabled. A decision of the failure
// mode (Degraded) is left out, as the enforcer leaves it out: it does not
// know the count the replicas share. Retry-After, on a refusal, is when
// every refusing descriptor admits again.
func (h *ResponseHeaders) render(reports []report, code ratelimitv3.RateLimitResponse_Code) []*corev3.HeaderValue {
	if !h.Enabled() {
		return nil
	}
	var out []*corev3.HeaderValue
	add := func(k, v string) { out = append(out, &corev3.HeaderValue{Key: k, Value: v}) }
	// the descriptor closest to its limit, as envoyproxy/ratelimit picks it
	pick, least := -1, uint32(math.MaxUint32)
	for i := range reports {
		r := &reports[i]
		if r.decision.Degraded {
			continue
		}
		if r.status.CurrentLimit != nil && r.status.LimitRemaining < least {
			pick, least = i, r.status.LimitRemaining
		}
		if r.refused {
			pick, least = i, 0
		}
	}
	if pick >= 0 {
		r := &reports[pick]
		if h.ERL {
			// ERL's requests_per_unit, or a bucket's burst above it: what
			// RateLimit-Remaining counts down from
			add(h.ERLLimit, strconv.FormatInt(max(int64(r.status.CurrentLimit.RequestsPerUnit), r.decision.Limit), 10))
			add(h.ERLRemaining, strconv.FormatUint(uint64(r.status.LimitRemaining), 10))
			add(h.ERLReset, strconv.FormatInt(ratelimitheaders.CeilSeconds(r.status.DurationUntilReset.AsDuration()), 10))
		}
		if h.XRateLimit {
			d := &r.decision
			add(headerXLimit, strconv.FormatInt(d.Limit, 10))
			add(headerXRemaining, strconv.FormatInt(d.Remaining, 10))
			add(headerXReset, strconv.FormatInt(ratelimitheaders.CeilUnix(d.Reset), 10))
		}
	}
	if h.IETF {
		var policy, limit []byte
		for i := range reports {
			r := &reports[i]
			if r.decision.Degraded {
				continue
			}
			d, name := &r.decision, r.rule.domain.bucket.Policy
			w := ratelimitheaders.BucketWindow(d.Limit, r.window.Requests, d.Period)
			policy = ratelimitheaders.AppendPolicyItem(ratelimitheaders.AppendListSep(policy), name, r.rule.Name, d.Limit, w)
			limit = ratelimitheaders.AppendRateLimitItem(ratelimitheaders.AppendListSep(limit), name, r.rule.Name, d.Remaining, d.Reset.Sub(d.Now))
		}
		if len(policy) > 0 {
			add(headerPolicy, string(policy))
			add(headerRateLimit, string(limit))
		}
	}
	if code == ratelimitv3.RateLimitResponse_OVER_LIMIT {
		var retry int64
		for i := range reports {
			if reports[i].refused {
				retry = max(retry, ratelimitheaders.RetryAfterSeconds(reports[i].decision.RetryAfter))
			}
		}
		if retry > 0 {
			add(headerRetryAfter, strconv.FormatInt(retry, 10))
		}
	}
	return out
}
