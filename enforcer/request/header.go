package request

import (
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
)

// hopByHop are the header fields that concern one connection only (RFC
// 9110, section 7.6.1), Proxy-Connection, which some clients still send,
// and HTTP2-Settings, which only means something with an h2c upgrade.
var hopByHop = [...]string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Http2-Settings",
}

// IsHopByHop reports whether the canonical header name k concerns one
// connection only.
func IsHopByHop(k string) bool {
	for _, h := range hopByHop {
		if k == h {
			return true
		}
	}
	return false
}

// removeHopByHop deletes the hop-by-hop fields of h and those Connection
// names, as a proxy must before anything reads the request. An upgrade
// keeps "Connection: Upgrade" and its Upgrade field, which the reverse proxy
// forwards; "TE: trailers" is kept for the application (gRPC needs it).
func removeHopByHop(h http.Header) {
	connection := h["Connection"]
	upgrade := ""
	if connection != nil {
		// Only WebSocket is passed on: after any other upgrade (h2c above
		// all) the connection would carry requests nobody decides on.
		if listed(connection, "Upgrade") && listed(h["Upgrade"], "websocket") {
			upgrade = "websocket"
		}
		for _, v := range connection {
			for v != "" {
				var token string
				token, v, _ = strings.Cut(v, ",")
				if token = textproto.TrimString(token); token != "" {
					delete(h, http.CanonicalHeaderKey(token))
				}
			}
		}
	}
	trailers := listed(h["Te"], "trailers")
	for _, k := range hopByHop {
		delete(h, k)
	}
	// net/http already took Content-Length and Transfer-Encoding into
	// r.ContentLength and r.TransferEncoding; the forwarders write the
	// framing, and 100-continue is answered here.
	delete(h, "Expect")
	if trailers {
		h["Te"] = []string{"trailers"}
	}
	if upgrade != "" {
		h["Connection"] = []string{"Upgrade"}
		h["Upgrade"] = []string{upgrade}
	}
}

// listed reports whether the comma-separated values name token, in any
// case.
func listed(values []string, token string) bool {
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

// checkIdentityHeaders refuses a request whose identity headers do not have
// one meaning: several values that differ, or a same-named field spelt with
// "_" that CGI gateways would pass under the same variable.
func (c *Canonicalizer) checkIdentityHeaders(h http.Header) error {
	if len(c.identityHeaders) == 0 {
		return nil
	}
	for k := range c.identityHeaders {
		for _, v := range h[k] {
			if !visibleASCII(strings.TrimSpace(v)) {
				return refuse(ReasonIdentity, "the "+k+" header holds characters other than visible ASCII, which applications may trim or fold otherwise than the limiter")
			}
		}
	}
	for k, vv := range h {
		if len(vv) > 1 {
			if _, ok := c.identityHeaders[k]; ok {
				first := strings.TrimSpace(vv[0])
				for _, v := range vv[1:] {
					if strings.TrimSpace(v) != first {
						return refuse(ReasonIdentity, "the request has several "+k+" headers with different values: send one")
					}
				}
			}
		}
		if strings.IndexByte(k, '_') >= 0 {
			if _, ok := c.identityHeaders[http.CanonicalHeaderKey(strings.ReplaceAll(k, "_", "-"))]; ok {
				return refuse(ReasonIdentity, "the header "+quote(k)+" would reach the application as an identity header: spell it with \"-\"")
			}
		}
	}
	return nil
}

// removeLookalikes deletes the fields whose names, with "_" for "-", are
// forwarding or routing headers that this peer may not send: CGI gateways
// would pass them to the application under the same variable.
func removeLookalikes(h http.Header, trusted bool) {
	for k := range h {
		if strings.IndexByte(k, '_') < 0 {
			continue
		}
		name := http.CanonicalHeaderKey(strings.ReplaceAll(k, "_", "-"))
		if isRoutingHeader(name) || (!trusted && isForwardingHeader(name)) {
			delete(h, k)
		}
	}
}

func isForwardingHeader(k string) bool {
	for _, f := range forwardingHeaders {
		if k == f {
			return true
		}
	}
	return false
}

// routingHeaders make some frameworks (IIS conventions, older Symfony,
// Laminas) route by them instead of the request-target, so the application
// would serve another path than the one decided on. No proxy needs to send
// them to the application.
var routingHeaders = [...]string{"X-Original-Url", "X-Rewrite-Url"}

func isRoutingHeader(k string) bool { return k == routingHeaders[0] || k == routingHeaders[1] }

// forwardingHeaders are the fields by which a proxy tells the application
// about the client; only a trusted proxy's are believed.
var forwardingHeaders = [...]string{
	"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
	"X-Forwarded-Port", "X-Forwarded-Prefix", "X-Forwarded-Server", "X-Forwarded-Ssl",
	"X-Real-Ip",
}

// setForwarded sets the forwarding headers the application receives. The
// limiter reads X-Forwarded-For after this, so what it decides on is what
// the application sees.
func (c *Canonicalizer) setForwarded(r *http.Request) {
	h := r.Header
	for _, k := range routingHeaders {
		delete(h, k)
	}
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = ""
	}
	trusted := false
	if addr, err := netip.ParseAddr(ip); err == nil {
		addr = addr.Unmap().WithZone("")
		ip = addr.String()
		for _, p := range c.trusted {
			if p.Contains(addr) {
				trusted = true
				break
			}
		}
	}
	if !trusted {
		for _, k := range forwardingHeaders {
			delete(h, k)
		}
	}
	removeLookalikes(h, trusted)
	if ip != "" {
		if prior := h["X-Forwarded-For"]; len(prior) > 0 {
			h["X-Forwarded-For"] = []string{strings.Join(prior, ", ") + ", " + ip}
		} else {
			h["X-Forwarded-For"] = []string{ip}
		}
	}
	if h["X-Forwarded-Host"] == nil && r.Host != "" {
		h["X-Forwarded-Host"] = []string{r.Host}
	}
	if h["X-Forwarded-Proto"] == nil {
		proto := "http"
		if r.TLS != nil {
			proto = "https"
		}
		h["X-Forwarded-Proto"] = []string{proto}
	}
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
