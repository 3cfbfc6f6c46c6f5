package request

import (
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
)

// fieldKind is what canonicalHeaders does with a header field.
type fieldKind uint8

const (
	endToEnd fieldKind = iota
	// hopByHop fields concern one connection only (RFC 9110, section
	// 7.6.1), with Proxy-Connection, which some clients still send, and
	// HTTP2-Settings, which only means something with an h2c upgrade.
	hopByHop
	// expect is answered by the enforcer itself (100-continue).
	expect
	// routing fields make some frameworks (IIS conventions, older
	// Symfony, Laminas) route by them instead of the request-target; no
	// proxy needs to send them to the application.
	routing
	// forwarding fields tell the application about the client; only a
	// trusted proxy's are believed.
	forwarding
)

// kindOf classifies a canonical header name; a switch on constant strings
// costs no hashing, unlike lookups in a map for every name.
func kindOf(k string) fieldKind {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Http2-Settings":
		return hopByHop
	case "Expect":
		return expect
	case "X-Original-Url", "X-Rewrite-Url":
		return routing
	case "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
		"X-Forwarded-Port", "X-Forwarded-Prefix", "X-Forwarded-Server", "X-Forwarded-Ssl", "X-Real-Ip":
		return forwarding
	}
	return endToEnd
}

// IsHopByHop reports whether the canonical header name k concerns one
// connection only.
func IsHopByHop(k string) bool { return kindOf(k) == hopByHop }

// canonicalHeaders makes r's header the one the application receives and
// the limiter reads, in one pass over its fields:
//
//   - hop-by-hop fields and those Connection names go, before anything
//     reads them; an upgrade to WebSocket keeps "Connection: Upgrade" and
//     "Upgrade: websocket" (any other upgrade, h2c above all, would carry
//     requests nobody decides on); "TE: trailers" is kept for the
//     application (gRPC needs it); Expect goes;
//   - routing fields always go, forwarding fields unless the peer is a
//     trusted proxy, and so do their spellings with "_", which CGI
//     gateways pass under the same variable;
//   - identity fields must have one value, in visible ASCII, and no
//     spelling with "_".
func (c *Canonicalizer) canonicalHeaders(h http.Header, trusted bool) error {
	connection := h["Connection"]
	websocket := connection != nil && Listed(connection, "Upgrade") && Listed(h["Upgrade"], "websocket")
	trailers := h["Te"] != nil && Listed(h["Te"], "trailers")
	for k, vv := range h {
		switch kindOf(k) {
		case hopByHop, expect, routing:
			delete(h, k)
			continue
		case forwarding:
			if !trusted {
				delete(h, k)
			}
			continue
		}
		if _, ok := c.identityHeaders[k]; ok {
			if err := oneMeaning(k, vv); err != nil {
				return err
			}
		}
		if strings.IndexByte(k, '_') < 0 {
			continue
		}
		name := http.CanonicalHeaderKey(strings.ReplaceAll(k, "_", "-"))
		if _, ok := c.identityHeaders[name]; ok {
			return refuse(ReasonIdentity, "the header "+quote(k)+" would reach the application as "+name+": spell it with \"-\"")
		}
		if kind := kindOf(name); kind == routing || (kind == forwarding && !trusted) {
			delete(h, k)
		}
	}
	for _, v := range connection {
		for v != "" {
			var token string
			token, v, _ = strings.Cut(v, ",")
			if token = textproto.TrimString(token); token != "" {
				delete(h, connectionOption(token))
			}
		}
	}
	if trailers {
		h["Te"] = []string{"trailers"}
	}
	if websocket {
		h["Connection"] = []string{"Upgrade"}
		h["Upgrade"] = []string{"websocket"}
	}
	return nil
}

// connectionOption is the header name a Connection option names, without
// an allocation for the options clients send on almost every request.
func connectionOption(token string) string {
	switch {
	case strings.EqualFold(token, "keep-alive"):
		return "Keep-Alive"
	case strings.EqualFold(token, "close"):
		return "Close"
	}
	return http.CanonicalHeaderKey(token)
}

// oneMeaning refuses the values of an identity field that applications
// could read otherwise than the limiter: several that differ, or one that
// is not visible ASCII (a no-break space that one application trims and
// another keeps).
func oneMeaning(k string, vv []string) error {
	first := strings.TrimSpace(vv[0])
	for i, v := range vv {
		if i > 0 {
			if v = strings.TrimSpace(v); v != first {
				return refuse(ReasonIdentity, "the request has several "+k+" headers with different values: send one")
			}
		}
		if !visibleASCII(v) {
			return refuse(ReasonIdentity, "the "+k+" header holds characters other than visible ASCII, which applications may trim or fold otherwise than the limiter")
		}
	}
	return nil
}

// Listed reports whether comma-separated header values (Connection, TE)
// name token, in any case, parameters aside.
func Listed(values []string, token string) bool {
	for _, v := range values {
		for v != "" {
			var t string
			t, v, _ = strings.Cut(v, ",")
			if t, _, _ = strings.Cut(t, ";"); strings.EqualFold(textproto.TrimString(t), token) {
				return true
			}
		}
	}
	return false
}

// visibleASCII reports whether v holds only visible ASCII, spaces and tabs.
func visibleASCII(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return false
		}
	}
	return true
}

// peer is the connection's peer address, in canonical form, and whether it
// is a trusted proxy; "" when it is no IP address.
func (c *Canonicalizer) peer(remoteAddr string) (ip string, trusted bool) {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return "", false
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return "", false
	}
	// ParseAddr takes IPv4 only in dotted decimal without leading zeros,
	// so host is already its canonical form: no need to print it again.
	if !addr.Is4() {
		addr = addr.Unmap().WithZone("")
		host = addr.String()
	}
	for _, p := range c.trusted {
		if p.Contains(addr) {
			return host, true
		}
	}
	return host, false
}

// setForwarded sets the forwarding headers the application receives, once
// canonicalHeaders has removed an untrusted peer's own. The limiter reads
// X-Forwarded-For after this, so what it decides on is what the
// application sees.
func setForwarded(r *http.Request, ip string) {
	h := r.Header
	// The two values share one backing array: one allocation, not two.
	vals := make([]string, 0, 2)
	if ip != "" {
		if prior := h["X-Forwarded-For"]; len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		vals = append(vals, ip)
		h["X-Forwarded-For"] = vals[0:1:1]
	}
	if h["X-Forwarded-Host"] == nil && r.Host != "" {
		vals = append(vals, r.Host)
		h["X-Forwarded-Host"] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if h["X-Forwarded-Proto"] == nil {
		if r.TLS != nil {
			h["X-Forwarded-Proto"] = https
		} else {
			h["X-Forwarded-Proto"] = http1
		}
	}
}

// The X-Forwarded-Proto values, shared by every request: a header value
// slice is never written to, only replaced.
var (
	http1 = []string{"http"}
	https = []string{"https"}
)
