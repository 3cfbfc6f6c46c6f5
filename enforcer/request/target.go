package request

import (
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// canonicalTarget checks r's request-target, rewrites r to origin-form with
// the cleaned path, and returns that path.
func canonicalTarget(r *http.Request) (string, error) {
	raw := r.RequestURI
	switch {
	case raw == "*":
		return "", refuse(ReasonTarget, `the request-target "*" is not forwarded to the application`)
	case raw == "":
		return "", refuse(ReasonTarget, "the request has no request-target")
	case strings.IndexByte(raw, '#') >= 0:
		return "", refuse(ReasonTarget, "the request-target holds a fragment (#): fragments are not sent in HTTP requests")
	}
	target := raw
	if raw[0] != '/' {
		// Absolute-form: its authority is the Host (net/http has set r.Host
		// from it); the application gets origin-form.
		rest, ok := cutScheme(raw)
		if !ok {
			return "", refuse(ReasonTarget, "the request-target must be a path (/...) or an absolute http:// URL")
		}
		if i := strings.IndexAny(rest, "/?"); i >= 0 {
			target = rest[i:]
		} else {
			target = "/"
		}
		if target[0] == '?' {
			target = "/" + target
		}
	}
	rawPath, rawQuery, _ := strings.Cut(target, "?")
	for i := 0; i < len(rawQuery); i++ {
		if c := rawQuery[i]; c < 0x20 || c == 0x7f {
			return "", refuse(ReasonTarget, "the query holds a control character")
		}
	}
	encoded := false
	for i := 0; i < len(rawPath); i++ {
		switch c := rawPath[i]; {
		case c < 0x20 || c == 0x7f:
			return "", refuse(ReasonTarget, "the path holds a control character")
		case c == '\\':
			return "", refuse(ReasonTarget, `the path holds a backslash, which some servers take for "/"`)
		case c == ';':
			return "", refuse(ReasonTarget, `the path holds ";": servers disagree on path parameters`)
		case c == '%':
			encoded = true
			if i+2 < len(rawPath) {
				if err := checkEscape(rawPath[i+1], rawPath[i+2]); err != nil {
					return "", err
				}
			}
		}
	}
	decoded := rawPath
	if encoded {
		var err error
		if decoded, err = url.PathUnescape(rawPath); err != nil {
			return "", refuse(ReasonTarget, "the path has an invalid percent-encoding")
		}
		for i := 0; i < len(decoded); i++ {
			switch c := decoded[i]; {
			case c < 0x20 || c == 0x7f:
				return "", refuse(ReasonTarget, "the path holds an encoded control character")
			case c == '%' && i+2 < len(decoded) && ishex(decoded[i+1]) && ishex(decoded[i+2]):
				// A server that decodes twice would route another path.
				return "", refuse(ReasonTarget, "the path is percent-encoded twice")
			}
		}
	}
	clean := CleanPath(decoded)
	r.URL.Scheme, r.URL.Host, r.URL.User, r.URL.Opaque, r.URL.Fragment, r.URL.RawFragment = "", "", nil, "", "", ""
	r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.URL.ForceQuery = clean, "", rawQuery, false
	if encoded || clean != rawPath {
		target = r.URL.EscapedPath()
		if rawQuery != "" {
			target += "?" + rawQuery
		}
	}
	r.RequestURI = target
	return clean, nil
}

// checkEscape refuses the encodings of characters that servers split or
// cut paths at differently: "/", "\" and ";".
func checkEscape(hi, lo byte) error {
	if hi != '2' && hi != '3' && hi != '5' {
		return nil
	}
	switch lo | 0x20 { // lower case
	case 'f':
		if hi == '2' {
			return refuse(ReasonTarget, `the path holds an encoded slash (%2F): servers disagree on whether it separates segments`)
		}
	case 'c':
		if hi == '5' {
			return refuse(ReasonTarget, `the path holds an encoded backslash (%5C)`)
		}
	case 'b':
		if hi == '3' {
			return refuse(ReasonTarget, `the path holds an encoded ";" (%3B): servers disagree on path parameters`)
		}
	}
	return nil
}

// cutScheme takes "http://" or "https://" (in any case) off an
// absolute-form target and returns the rest.
func cutScheme(raw string) (string, bool) {
	for _, s := range [...]string{"http://", "https://"} {
		if len(raw) >= len(s) && strings.EqualFold(raw[:len(s)], s) {
			return raw[len(s):], true
		}
	}
	return "", false
}

// canonicalHost rewrites r.Host to lower case without a trailing dot and
// returns the host rules match (without port or brackets). An HTTP/2
// request may carry a Host field besides its :authority, which an
// HTTP/1.1 application would read as a second Host: it is dropped when it
// names the same host, and the request refused when it names another
// (RFC 9113, 8.3.1).
func canonicalHost(r *http.Request) (string, error) {
	canonical, match, err := canonicalAuthority(r.Host)
	if err != nil {
		return "", err
	}
	if canonical != r.Host {
		r.Host = canonical
	}
	if fields, ok := r.Header["Host"]; ok {
		for _, f := range fields {
			if c, _, err := canonicalAuthority(f); err != nil || c != canonical {
				return "", refuse(ReasonHost, "the request's Host header names another host than its :authority")
			}
		}
		delete(r.Header, "Host")
	}
	return match, nil
}

// canonicalAuthority is host (a Host header's value) in lower case without
// a trailing dot, and the host rules match.
func canonicalAuthority(h string) (canonical, match string, err error) {
	if h == "" {
		return "", "", nil
	}
	name, port := h, ""
	if i := strings.LastIndexByte(h, ':'); i >= 0 && i > strings.LastIndexByte(h, ']') {
		name, port = h[:i], h[i:]
		if !validPort(port[1:]) {
			return "", "", refuse(ReasonHost, "the Host header has an invalid port")
		}
	}
	switch {
	case len(name) > 1 && name[0] == '[' && name[len(name)-1] == ']':
		if ip := net.ParseIP(name[1 : len(name)-1]); ip == nil || strings.IndexByte(name, '%') >= 0 {
			return "", "", refuse(ReasonHost, "the Host header is not a valid IPv6 literal")
		}
		match = strings.ToLower(name[1 : len(name)-1])
		name = "[" + match + "]"
	default:
		name = strings.TrimSuffix(name, ".")
		if !validHostname(name) {
			return "", "", refuse(ReasonHost, "the Host header is not a DNS name or an IP address")
		}
		name = strings.ToLower(name)
		match = name
	}
	return name + port, match, nil
}

func validPort(p string) bool {
	if p == "" || len(p) > 5 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	return true
}

// validHostname accepts letters, digits, "-", "_" and "." (no empty
// label): DNS names as they are used in Host headers, and IPv4 addresses.
func validHostname(h string) bool {
	if h == "" || len(h) > 253 || h[0] == '.' || h[len(h)-1] == '.' {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		case c == '.':
			if h[i-1] == '.' {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// CleanPath cleans p as http.ServeMux does: rooted, without "//", "." or
// "..", keeping a trailing slash. A clean path is returned as is.
func CleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		if len(p) == len(np)+1 && strings.HasPrefix(p, np) {
			return p
		}
		return np + "/"
	}
	return np
}

func ishex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// Fold is s as limited rules compare it: ASCII letters in lower case, and
// any other letter as the lower case of the first of its Unicode case
// folding orbit, so that "ſ" (long s) is "s" and the Kelvin sign "k", as
// case-insensitive comparisons such as Java's equalsIgnoreCase take them.
func Fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s) // no allocation when already lower case
	}
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return unicode.ToLower(least)
	}, s)
}
