// Package ratelimitheaders renders the rate limit response headers Sluice
// writes: X-RateLimit-Limit, -Remaining, -Reset, -Debt, Retry-After, and
// the IETF RateLimit-Policy and RateLimit structured fields
// (draft-ietf-httpapi-ratelimit-headers). The enforcer's proxy and the rate
// limit service (enforcer/rls) both write them with these functions, so a
// client reads the same values from either. It imports no package of this
// module.
//
// The IETF fields are Structured Field Lists (RFC 9651) of String items with
// Integer parameters:
//
//	RateLimit-Policy: "public-api/api";q=60;w=60
//	RateLimit: "public-api/api";r=59;t=1
//
// Only that shape is ever written, so it is serialized here directly into a
// reused buffer rather than through a general Structured Field library,
// which would allocate per item and parameter on every response. The tests
// parse the output with such a library to hold it to the RFC.
package ratelimitheaders

import (
	"strconv"
	"time"
)

// Header names, in canonical form.
const (
	Limit      = "X-Ratelimit-Limit"
	Remaining  = "X-Ratelimit-Remaining"
	Reset      = "X-Ratelimit-Reset"
	Policy     = "Ratelimit-Policy"
	RateLimit  = "Ratelimit"
	RetryAfter = "Retry-After"
	// Debt is how many units a rule whose answers report their cost is
	// below empty, beside Remaining's 0; written only when it is in debt.
	Debt = "X-Ratelimit-Debt"
)

// AppendPolicyItem appends one member of RateLimit-Policy:
// "<policy>/<rule>";q=<limit>;w=<window in seconds, at least 1>.
func AppendPolicyItem(b []byte, policy, rule string, limit int64, period time.Duration) []byte {
	b = AppendName(b, policy, rule)
	b = AppendParam(b, "q", limit)
	return AppendParam(b, "w", max(CeilSeconds(period), 1))
}

// BucketWindow is the w of RateLimit-Policy for a limit whose q is its
// capacity: a bucket holding capacity units, refilled at requests per
// period, takes period × capacity / requests to fill again, so q is the
// burst a client may spend at once and q/w its rate. A limit whose
// capacity is its requests (no burst above its rate) keeps its period.
func BucketWindow(capacity, requests int64, period time.Duration) time.Duration {
	if requests < 1 || capacity <= requests {
		return period
	}
	return time.Duration(float64(period) * float64(capacity) / float64(requests))
}

// AppendRateLimitItem appends one member of RateLimit:
// "<policy>/<rule>";r=<remaining>;t=<seconds until the window is whole>.
func AppendRateLimitItem(b []byte, policy, rule string, remaining int64, reset time.Duration) []byte {
	b = AppendName(b, policy, rule)
	b = AppendParam(b, "r", remaining)
	return AppendParam(b, "t", CeilSeconds(reset))
}

// AppendName appends "<policy>/<rule>" as a Structured Field String.
func AppendName(b []byte, policy, rule string) []byte {
	b = append(b, '"')
	b = appendChars(b, policy)
	b = append(b, '/')
	b = appendChars(b, rule)
	return append(b, '"')
}

// AppendString appends s as a Structured Field String.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendChars(b, s)
	return append(b, '"')
}

// appendChars appends s escaped for a Structured Field String: '"' and
// '\' are escaped. A String may only hold printable ASCII; any other byte
// (a rule name is free text) is written as '?', since a field that fails to
// parse would make a client ignore every limit in it.
func appendChars(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	return b
}

// maxInteger is the largest Structured Field Integer (15 digits).
const maxInteger = 999_999_999_999_999

// AppendParam appends ";key=value" with value as a Structured Field
// Integer, clamped to what one can hold.
func AppendParam(b []byte, key string, value int64) []byte {
	b = append(b, ';')
	b = append(b, key...)
	b = append(b, '=')
	return strconv.AppendInt(b, min(max(value, -maxInteger), maxInteger), 10)
}

// AppendListSep appends the separator of List members when b already holds one.
func AppendListSep(b []byte) []byte {
	if len(b) > 0 {
		b = append(b, ',', ' ')
	}
	return b
}

// CeilSeconds is d in whole seconds, rounded up, never negative: a client
// waiting that long is sure to find the window replenished.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// CeilUnix is t in Unix seconds, rounded up.
func CeilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// RetryAfterSeconds is Retry-After for a refusal that lifts after d: whole
// seconds, rounded up, at least 1 (0 would invite an immediate retry).
func RetryAfterSeconds(d time.Duration) int64 {
	return max(CeilSeconds(d), 1)
}
