package identity

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/request"
)

// ParseTrustedProxies parses CIDRs such as "10.0.0.0/8" or "fd00::/8".
func ParseTrustedProxies(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q is not a CIDR: %w", c, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ClientAddr is the address of the client that sent r.
//
// It is the connection's peer address, unless the peer is one of the
// trusted proxies: then X-Forwarded-For is read from the right (the entry
// the nearest proxy appended) and the first address that is not itself a
// trusted proxy is the client. Entries left of it were written by the
// client or by proxies nobody vouches for, so a client forging
// X-Forwarded-For only ever names itself. When every entry is a trusted
// proxy, the left-most one is the client. An entry that is not an IP
// address (garbage, "unknown", an empty entry) stops the walk at the last
// address a trusted proxy wrote: client input never becomes a tenant
// unless it parses as an address.
//
// Addresses are compared and returned without port or IPv6 zone, IPv4
// mapped IPv6 addresses as IPv4. ok is false when the peer address cannot
// be parsed (a Unix socket).
func ClientAddr(r *request.Request, trusted []netip.Prefix) (addr netip.Addr, ok bool) {
	peer, ok := parseAddr(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	return rightmostUntrusted(peer, r.Header["X-Forwarded-For"], trusted), true
}

// rightmostUntrusted walks the X-Forwarded-For header lines from the last
// entry of the last line to the first of the first.
func rightmostUntrusted(peer netip.Addr, xff []string, trusted []netip.Prefix) netip.Addr {
	client := peer
	if !isTrusted(peer, trusted) {
		return client
	}
	for i := len(xff) - 1; i >= 0; i-- {
		line := xff[i]
		for done := false; !done; {
			entry := line
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				entry, line = line[j+1:], line[:j]
			} else {
				done = true
			}
			addr, ok := parseAddr(strings.TrimSpace(entry))
			if !ok {
				return client
			}
			client = addr
			if !isTrusted(addr, trusted) {
				return client
			}
		}
	}
	return client
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseAddr reads "1.2.3.4", "1.2.3.4:80", "::1", "[::1]" or "[::1]:80",
// choosing the parser by shape so the common cases allocate no error.
func parseAddr(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	var a netip.Addr
	var err error
	switch {
	case s[0] == '[' && s[len(s)-1] == ']':
		a, err = netip.ParseAddr(s[1 : len(s)-1])
	case s[0] == '[' || strings.Count(s, ":") == 1:
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(s)
		a = ap.Addr()
	default:
		a, err = netip.ParseAddr(s)
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}
