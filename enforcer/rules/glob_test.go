package rules

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/request"
)

func TestGlob(t *testing.T) {
	cases := []struct {
		glob  string
		match []string
		miss  []string
	}{
		{"/v1/*", []string{"/v1/x", "/v1/x/"}, []string{"/v1", "/v1/", "/v1/x/y", "/v2/x"}},
		{"/v1/*/orders", []string{"/v1/acme/orders"}, []string{"/v1/orders", "/v1/a/b/orders"}},
		{"/v1/exports/**", []string{"/v1/exports", "/v1/exports/", "/v1/exports/a", "/v1/exports/a/b/c"}, []string{"/v1/export", "/v1/exportsx", "/v1"}},
		{"/**", []string{"/", "/a", "/a/b/c"}, nil},
		{"/**/export", []string{"/export", "/a/export", "/a/b/export", "/export/"}, []string{"/export/a", "/exports", "/"}},
		{"/a/**/b", []string{"/a/b", "/a/x/b", "/a/x/y/b", "/a/b/b", "/a/b/x/b"}, []string{"/a", "/b", "/a/b/c", "/x/a/b"}},
		{"/a/**/b/**/c", []string{"/a/b/c", "/a/1/b/2/3/c", "/a/b/b/c/c"}, []string{"/a/c/b", "/a/b", "/a/b/c/d"}},
		{"/**/**", []string{"/", "/x/y"}, nil},
		{"/files/*.pdf", []string{"/files/a.pdf", "/files/.pdf"}, []string{"/files/a.pdf/x", "/files/a.txt", "/files/dir/a.pdf"}},
		{"/v*/users", []string{"/v1/users", "/v/users", "/v10/users"}, []string{"/x1/users"}},
		{"/a*b*c", []string{"/abc", "/aXbYc", "/abbbc", "/acbc"}, []string{"/acb", "/ab"}},
		{"/healthz", []string{"/healthz", "/healthz/"}, []string{"/healthz/x", "/health"}},
		{"/", []string{"/"}, []string{"/a"}},
		{"/*", []string{"/a"}, []string{"/", "/a/b"}},
	}
	for _, c := range cases {
		t.Run(c.glob, func(t *testing.T) {
			g := NewWithT(t)
			gl := compileGlob(request.CleanPath(c.glob))
			for _, p := range c.match {
				g.Expect(gl.match(p)).To(BeTrue(), "%s should match %s", c.glob, p)
			}
			for _, p := range c.miss {
				g.Expect(gl.match(p)).To(BeFalse(), "%s should not match %s", c.glob, p)
			}
		})
	}
}

// globRegexp is the reference semantics of a glob, as a regular expression
// over a cleaned path without its trailing slash.
func globRegexp(glob string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	if trimmed := strings.Trim(glob, "/"); trimmed != "" {
		for _, seg := range strings.Split(trimmed, "/") {
			switch seg {
			case "**":
				b.WriteString("(/[^/]+)*")
			case "*":
				b.WriteString("/[^/]+")
			default:
				parts := strings.Split(seg, "*")
				for i := range parts {
					parts[i] = regexp.QuoteMeta(parts[i])
				}
				b.WriteString("/" + strings.Join(parts, "[^/]*"))
			}
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// FuzzGlob checks that no glob or path panics, and that on cleaned paths
// the matcher agrees with the regular expression of the glob.
func FuzzGlob(f *testing.F) {
	for _, seed := range [][2]string{
		{"/v1/exports/**", "/v1/exports/a/b"},
		{"/**/export", "/a/b/export"},
		{"/a/**/b/**/c", "/a/1/b/2/3/c"},
		{"/a/**/b", "/a/b/x/b"},
		{"/files/*.pdf", "/files/a.pdf"},
		{"/a*b*c", "/aXbYbc"},
		{"/*/*/*", "/a//b/"},
		{"/**", "/"},
		{"*", ""},
		{"/***/a**b/*", "/x/aab/c"},
		{"/./../a/*", "/a/%2F"},
		{"/\x00/*", "/\x00/\xff"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		compileGlob(pattern).match(path) // raw input: must only not panic
		clean := request.CleanPath(pattern)
		gl := compileGlob(clean)
		p := request.CleanPath(path)
		got := gl.match(p)
		if !utf8.ValidString(clean) || !utf8.ValidString(p) {
			return // the reference reads UTF-8; the matcher reads bytes, and '/' is never inside a UTF-8 sequence
		}
		ref := globRegexp(clean)
		if want := ref.MatchString(strings.TrimSuffix(p, "/")); got != want {
			t.Fatalf("glob %q on %q: matcher says %v, reference %s says %v", clean, p, got, ref, want)
		}
	})
}
