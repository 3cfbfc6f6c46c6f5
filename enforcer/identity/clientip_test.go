package identity

import (
	"net/netip"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
)

func TestClientAddrBelievesXForwardedForOnlyFromTrustedProxies(t *testing.T) {
	trusted := []string{"10.0.0.0/8", "fd00::/8", "192.0.2.10/32"}
	cases := map[string]struct {
		remote string
		xff    []string // one element per header line
		client string
		ok     bool
	}{
		"no proxy":                      {remote: "203.0.113.9:51234", client: "203.0.113.9", ok: true},
		"untrusted peer, spoofed XFF":   {remote: "203.0.113.9:51234", xff: []string{"1.1.1.1"}, client: "203.0.113.9", ok: true},
		"trusted peer without XFF":      {remote: "10.1.2.3:51234", client: "10.1.2.3", ok: true},
		"trusted peer, one hop":         {remote: "10.1.2.3:51234", xff: []string{"203.0.113.9"}, client: "203.0.113.9", ok: true},
		"client forges the left part":   {remote: "10.1.2.3:51234", xff: []string{"1.1.1.1, 8.8.8.8, 203.0.113.9"}, client: "203.0.113.9", ok: true},
		"chain of trusted proxies":      {remote: "10.1.2.3:51234", xff: []string{"1.1.1.1, 203.0.113.9, 192.0.2.10, 10.9.9.9"}, client: "203.0.113.9", ok: true},
		"several header lines":          {remote: "10.1.2.3:51234", xff: []string{"1.1.1.1, 203.0.113.9", "10.0.0.7", "10.0.0.8"}, client: "203.0.113.9", ok: true},
		"every hop trusted":             {remote: "10.1.2.3:51234", xff: []string{"10.0.0.5, 10.0.0.6"}, client: "10.0.0.5", ok: true},
		"whitespace and tabs":           {remote: "10.1.2.3:51234", xff: []string{" 203.0.113.9 ,\t10.0.0.6\t"}, client: "203.0.113.9", ok: true},
		"entries with ports":            {remote: "10.1.2.3:51234", xff: []string{"203.0.113.9:443, [fd00::1]:80"}, client: "203.0.113.9", ok: true},
		"garbage stops at the last hop": {remote: "10.1.2.3:51234", xff: []string{"203.0.113.9, unknown, 10.0.0.6"}, client: "10.0.0.6", ok: true},
		"garbage next to the peer":      {remote: "10.1.2.3:51234", xff: []string{"203.0.113.9, <script>"}, client: "10.1.2.3", ok: true},
		"empty entry stops":             {remote: "10.1.2.3:51234", xff: []string{"203.0.113.9,,"}, client: "10.1.2.3", ok: true},
		"empty header line stops":       {remote: "10.1.2.3:51234", xff: []string{"203.0.113.9", ""}, client: "10.1.2.3", ok: true},
		"garbage left of the client":    {remote: "10.1.2.3:51234", xff: []string{"garbage, 203.0.113.9"}, client: "203.0.113.9", ok: true},
		"IPv6 peer untrusted":           {remote: "[2001:db8::1]:443", xff: []string{"1.1.1.1"}, client: "2001:db8::1", ok: true},
		"IPv6 trusted peer":             {remote: "[fd00::5]:443", xff: []string{"2001:db8::7, fd00::9"}, client: "2001:db8::7", ok: true},
		"IPv6 entry in brackets":        {remote: "[fd00::5]:443", xff: []string{"[2001:DB8::7]"}, client: "2001:db8::7", ok: true},
		"IPv6 zone dropped":             {remote: "[fe80::1%eth0]:443", client: "fe80::1", ok: true},
		"IPv4-mapped peer is trusted":   {remote: "[::ffff:10.1.2.3]:443", xff: []string{"::ffff:203.0.113.9"}, client: "203.0.113.9", ok: true},
		"peer without port":             {remote: "203.0.113.9", client: "203.0.113.9", ok: true},
		"unix socket peer":              {remote: "@", ok: false},
		"empty peer":                    {remote: "", ok: false},
	}
	prefixes, err := ParseTrustedProxies(trusted)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newRequest("GET", "/", c.remote)
			for _, line := range c.xff {
				r.Header.Add("X-Forwarded-For", line)
			}
			addr, ok := ClientAddr(r, prefixes)
			g.Expect(ok).To(Equal(c.ok))
			if c.ok {
				g.Expect(addr.String()).To(Equal(c.client))
			}
		})
	}
}

func TestClientIPSourceWithoutTrustedProxiesIgnoresXFF(t *testing.T) {
	g := NewWithT(t)
	res, err := New(config.Identity{Sources: []config.Source{clientIP()}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Resolve(newRequest("GET", "/", "10.1.2.3:5", "X-Forwarded-For: 1.1.1.1")).Tenant).To(Equal("10.1.2.3"))
	g.Expect(res.Resolve(newRequest("GET", "/", "@")).Tenant).To(Equal(Anonymous), "no address, no tenant")
}

func TestParseTrustedProxies(t *testing.T) {
	g := NewWithT(t)
	ps, err := ParseTrustedProxies([]string{"10.1.2.3/8", " fd00::/8 "})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ps).To(Equal([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}))
	_, err = ParseTrustedProxies([]string{"10.0.0.1"})
	g.Expect(err).To(MatchError(ContainSubstring(`"10.0.0.1" is not a CIDR`)))
}

// FuzzClientAddr checks that no peer address or X-Forwarded-For panics, and
// that the client is always the peer or an address of the header.
func FuzzClientAddr(f *testing.F) {
	for _, seed := range []struct{ remote, xff string }{
		{"10.1.2.3:80", "203.0.113.9, 10.0.0.2"},
		{"10.1.2.3:80", "1.1.1.1, 203.0.113.9, 192.0.2.10, 10.9.9.9"},
		{"203.0.113.9:443", "1.1.1.1"},
		{"[fd00::5]:443", "[2001:db8::7]:80, fd00::9"},
		{"[fe80::1%eth0]:1", "fe80::2%25eth0"},
		{"[::ffff:10.1.2.3]:443", "::ffff:1.2.3.4"},
		{"10.1.2.3:80", "unknown, ,, ::, [, ], [], :80, 1.2.3.4:99999"},
		{"10.1.2.3:80", "\x00\xff, 300.1.1.1, 1.2.3"},
		{"@", "1.1.1.1"},
		{"", ""},
		{"10.1.2.3", ","},
	} {
		f.Add(seed.remote, seed.xff)
	}
	trusted, err := ParseTrustedProxies([]string{"10.0.0.0/8", "fd00::/8", "192.0.2.10/32"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := newRequest("GET", "/", remote)
		r.Header["X-Forwarded-For"] = strings.Split(xff, "\n")
		addr, ok := ClientAddr(r, trusted)
		if !ok {
			return
		}
		if !addr.IsValid() || addr.Zone() != "" || addr.Is4In6() {
			t.Fatalf("ClientAddr(%q, %q) = %v: not a plain address", remote, xff, addr)
		}
		peer, _ := parseAddr(remote)
		fromHeader := false
		for _, entry := range strings.FieldsFunc(xff, func(c rune) bool { return c == ',' || c == '\n' }) {
			if a, ok := parseAddr(strings.TrimSpace(entry)); ok && a == addr {
				fromHeader = true
			}
		}
		if addr != peer && !fromHeader {
			t.Fatalf("ClientAddr(%q, %q) = %v: neither the peer nor from the header", remote, xff, addr)
		}
		if !isTrusted(peer, trusted) && addr != peer {
			t.Fatalf("ClientAddr(%q, %q) = %v: believed XFF from untrusted peer %v", remote, xff, addr, peer)
		}
	})
}
