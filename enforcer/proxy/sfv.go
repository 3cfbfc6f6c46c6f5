package proxy

import "strconv"

// The IETF RateLimit-Policy and RateLimit fields are Structured Field Lists
// (RFC 9651) of String items with Integer parameters:
//
//	RateLimit-Policy: "public-api/api";q=60;w=60
//	RateLimit: "public-api/api";r=59;t=1
//
// Only that shape is ever written, so it is serialized here directly into a
// reused buffer rather than through a general Structured Field library,
// which would allocate per item and parameter on every response. The tests
// parse the output with such a library to hold it to the RFC.

// appendSFName appends "<policy>/<rule>" as a Structured Field String.
func appendSFName(b []byte, policy, rule string) []byte {
	b = append(b, '"')
	b = appendSFChars(b, policy)
	b = append(b, '/')
	b = appendSFChars(b, rule)
	return append(b, '"')
}

// appendSFChars appends s escaped for a Structured Field String: '"' and
// '\' are escaped. A String may only hold printable ASCII; any other byte
// (a rule name is free text) is written as '?', since a field that fails to
// parse would make a client ignore every limit in it.
func appendSFChars(b []byte, s string) []byte {
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

// maxSFInteger is the largest Structured Field Integer (15 digits).
const maxSFInteger = 999_999_999_999_999

// appendSFParam appends ";key=value" with value as a Structured Field
// Integer, clamped to what one can hold.
func appendSFParam(b []byte, key string, value int64) []byte {
	b = append(b, ';')
	b = append(b, key...)
	b = append(b, '=')
	return strconv.AppendInt(b, min(max(value, -maxSFInteger), maxSFInteger), 10)
}

// appendListSep appends the separator of List members when b already holds one.
func appendListSep(b []byte) []byte {
	if len(b) > 0 {
		b = append(b, ',', ' ')
	}
	return b
}
