package enforcer

import (
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A banned tenant tries to walk around its ban with the bytes of its
// request: case, duplicates, encodings, hop-by-hop headers, another
// spelling of the method or path. Whatever the enforcer forwards, the
// application must never receive a POST /login from the banned tenant:
// every variant is refused (the ban, or 400 for what is ambiguous) or
// reaches the application as something that is not the banned request.
func TestBanHoldsAgainstRawByteVariants(t *testing.T) {
	g := NewWithT(t)
	app := newByteApp(t)
	e := start(t, setup{policies: loginPolicy("evade", "1m", "1m"), upstream: app.url})
	tenantLine := tenantOf(t, "mallory")
	tenant := strings.TrimPrefix(tenantLine, "X-Tenant-ID: ")
	banTenant(t, g, e, tenantLine)

	login := func(start string, fields ...string) string {
		return rq(start, append([]string{hostLine, "Content-Length: 0"}, fields...)...)
	}
	variants := map[string]string{
		"as banned":                    login("POST /login HTTP/1.1", tenantLine),
		"lower-case header name":       login("POST /login HTTP/1.1", "x-tenant-id: "+tenant),
		"upper-case header name":       login("POST /login HTTP/1.1", "X-TENANT-ID: "+tenant),
		"value with white space":       login("POST /login HTTP/1.1", "X-Tenant-ID: \t"+tenant+" \t"),
		"duplicate, banned first":      login("POST /login HTTP/1.1", tenantLine, "X-Tenant-ID: alice"),
		"duplicate, banned second":     login("POST /login HTTP/1.1", "X-Tenant-ID: alice", tenantLine),
		"identity named hop-by-hop":    login("POST /login HTTP/1.1", tenantLine, "Connection: X-Tenant-ID"),
		"percent-encoded path":         login("POST /%6Cogin HTTP/1.1", tenantLine),
		"upper-case percent-encoding":  login("POST /%6cOGIN HTTP/1.1", tenantLine),
		"dot segment":                  login("POST /x/../login HTTP/1.1", tenantLine),
		"double slash":                 login("POST //login HTTP/1.1", tenantLine),
		"trailing slash":               login("POST /login/ HTTP/1.1", tenantLine),
		"query string":                 login("POST /login?next=/ HTTP/1.1", tenantLine),
		"absolute form":                login("POST http://app.example.com/login HTTP/1.1", tenantLine),
		"lower-case method":            login("post /login HTTP/1.1", tenantLine),
		"method override header":       login("POST /login HTTP/1.1", tenantLine, "X-HTTP-Method-Override: GET"),
		"chunked, no content length":   rq("POST /login HTTP/1.1", hostLine, tenantLine, "Transfer-Encoding: chunked") + "0\r\n\r\n",
		"HTTP/1.0":                     login("POST /login HTTP/1.0", tenantLine),
		"pipelined behind an admitted": rq("GET /other HTTP/1.1", hostLine) + login("POST /login HTTP/1.1", tenantLine),
	}
	before := len(app.requests())
	for name, raw := range variants {
		ex := exchange(t, e, attack{name: name, raw: raw})
		for _, a := range ex.answers {
			if a.status == http.StatusTooManyRequests {
				g.Expect(a.body).To(ContainSubstring("problems/banned"), "%s: a 429 for a banned tenant is its ban", name)
			}
		}
	}
	time.Sleep(150 * time.Millisecond) // a smuggled request may still be on its way
	for _, r := range app.requests()[before:] {
		u, err := url.Parse(r.target)
		g.Expect(err).NotTo(HaveOccurred(), "%s", r.raw)
		p := path.Clean("/" + u.Path)
		if !strings.EqualFold(r.method, http.MethodPost) || !strings.EqualFold(strings.TrimSuffix(p, "/"), "/login") {
			continue
		}
		for _, f := range r.fields {
			if strings.EqualFold(f.name, "X-Tenant-ID") && strings.TrimSpace(f.value) == tenant {
				t.Errorf("the application received the banned tenant's login:\n%s", r.raw)
			}
		}
	}
}
