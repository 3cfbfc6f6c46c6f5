package transport

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/rawapp"
)

// TestForwarderMatchesReverseProxy holds the forwarder to the library: the
// same requests, sent once through it and once through httputil's reverse
// proxy with http.Transport, reach a byte-logging application with the
// same request line, Host, header fields (in any order) and body. The
// trailer is the client's on the forwarder; the reverse proxy sends the
// trailer's names without their values (it clones the request before the
// body is read, and the values with it), which is why trailers do not take
// that path.
func TestForwarderMatchesReverseProxy(t *testing.T) {
	chunked := func(parts ...string) string {
		var b strings.Builder
		for _, p := range parts {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(p), p)
		}
		return b.String() + "0\r\n"
	}
	large := strings.Repeat("L", 100<<10)
	fwd := "X-Forwarded-For: 203.0.113.9, 10.1.2.3\r\nX-Forwarded-Host: shop.example.com\r\nX-Forwarded-Proto: https\r\nForwarded: for=203.0.113.9;proto=https\r\n"
	requests := []struct{ name, raw string }{
		{"GET", "GET /v1/orders HTTP/1.1\r\nHost: shop.example.com\r\n" + fwd + "\r\n"},
		{"GET with a query", "GET /v1/orders?page=2&sort=-date HTTP/1.1\r\nHost: shop.example.com\r\n\r\n"},
		{"GET with ; in the query", "GET /search?q=a;b&x=%20y HTTP/1.1\r\nHost: shop.example.com\r\n\r\n"},
		{"an empty query", "GET /v1/orders? HTTP/1.1\r\nHost: shop.example.com\r\n\r\n"},
		{"escaped path", "GET /files/a%2Fb/caf%C3%A9;v=1 HTTP/1.1\r\nHost: shop.example.com\r\n\r\n"},
		{"HEAD", "HEAD /v1/orders HTTP/1.1\r\nHost: shop.example.com\r\nAccept: text/html\r\n\r\n"},
		{"OPTIONS", "OPTIONS /v1/orders HTTP/1.1\r\nHost: shop.example.com\r\nOrigin: https://a.test\r\nAccess-Control-Request-Method: PUT\r\n\r\n"},
		{"DELETE", "DELETE /v1/orders/7 HTTP/1.1\r\nHost: shop.example.com\r\nAuthorization: Bearer abc\r\n\r\n"},
		{"repeated and odd-case fields", "GET / HTTP/1.1\r\nHost: shop.example.com\r\naccept: a/b\r\nACCEPT: c/d\r\nx-tenant-id: t1\r\nCookie: a=1\r\nCookie: b=2\r\nUser-Agent: curl/8\r\n\r\n"},
		{"POST without a body", "POST /v1/orders HTTP/1.1\r\nHost: shop.example.com\r\nContent-Length: 0\r\n\r\n"},
		{"POST small", "POST /v1/orders HTTP/1.1\r\nHost: shop.example.com\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"item\": 42}\n"},
		{"PUT large", fmt.Sprintf("PUT /v1/blob HTTP/1.1\r\nHost: shop.example.com\r\nContent-Length: %d\r\n\r\n%s", len(large), large)},
		{"PATCH chunked", "PATCH /v1/orders/7 HTTP/1.1\r\nHost: shop.example.com\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked("part one, ", "part two") + "\r\n"},
		{"POST chunked large", "POST /v1/blob HTTP/1.1\r\nHost: shop.example.com\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(large, large) + "\r\n"},
		{"POST chunked with trailers", "POST /v1/blob HTTP/1.1\r\nHost: shop.example.com\r\nTe: trailers\r\nTrailer: X-Checksum, X-Count\r\nTransfer-Encoding: chunked\r\n\r\n" +
			chunked("data") + "X-Checksum: abc\r\nX-Count: 1\r\n\r\n"},
		{"no Host", "GET /v1/orders HTTP/1.0\r\n\r\n"},
		{"hop-by-hop fields", "GET / HTTP/1.1\r\nHost: shop.example.com\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\nTe: gzip\r\nProxy-Authorization: Basic eDp5\r\nExpect: 100-continue\r\n\r\n"},
	}
	received := make(chan *rawapp.Request, 1)
	app := rawapp.Serve(t, func(conn net.Conn, sent *rawapp.Request) bool {
		received <- sent
		_, err := io.WriteString(conn, "HTTP/1.1 204 No Content\r\n\r\n")
		return err == nil
	})
	servers := map[string]string{}
	for _, path := range forwardPaths {
		servers[path] = strings.TrimPrefix(pathOnly(t, path, Options{}, app), "http://")
	}
	for _, tc := range requests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			seen := map[string]*rawapp.Request{}
			for _, path := range forwardPaths {
				conn, err := net.Dial("tcp", servers[path])
				g.Expect(err).NotTo(HaveOccurred())
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				_, err = io.WriteString(conn, tc.raw)
				g.Expect(err).NotTo(HaveOccurred())
				br := bufio.NewReader(conn)
				for {
					resp, err := http.ReadResponse(br, nil)
					g.Expect(err).NotTo(HaveOccurred(), path)
					resp.Body.Close()
					if resp.StatusCode >= 200 {
						g.Expect(resp.StatusCode).To(Equal(http.StatusNoContent), path)
						break
					}
				}
				conn.Close()
				var sent *rawapp.Request
				g.Eventually(received).Should(Receive(&sent), path)
				seen[path] = sent
			}
			f, rp := seen["forwarder"], seen["reverse-proxy"]
			fLine, fFields := splitHead(f.Head)
			rLine, rFields := splitHead(rp.Head)
			g.Expect(fLine).To(Equal(rLine), "request line")
			// A transport that does not pool says so on every request.
			rFields = slices.DeleteFunc(rFields, func(l string) bool { return l == "Connection: close" })
			g.Expect(fFields).To(ConsistOf(rFields), "header fields")
			g.Expect(string(f.Body)).To(Equal(string(rp.Body)), "body")
			if strings.Contains(tc.raw, "\r\nTrailer: ") {
				g.Expect(f.Trailer).To(Equal("X-Checksum: abc\r\nX-Count: 1\r\n\r\n"), "trailer")
			} else {
				g.Expect(f.Trailer).To(Equal(rp.Trailer), "trailer")
			}
		})
	}
}

// splitHead is the request line and the header field lines of a head.
func splitHead(head string) (string, []string) {
	lines := strings.Split(strings.TrimSuffix(head, "\r\n\r\n"), "\r\n")
	return lines[0], lines[1:]
}
