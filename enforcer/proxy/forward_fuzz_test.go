package proxy

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// cannedConn is a connection to an application that accepts any request
// and answers with fixed bytes.
type cannedConn struct{ answer *bytes.Reader }

func (c *cannedConn) Read(b []byte) (int, error)  { return c.answer.Read(b) }
func (c *cannedConn) Write(b []byte) (int, error) { return len(b), nil }
func (c *cannedConn) Close() error                { return nil }
func (c *cannedConn) LocalAddr() net.Addr         { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (c *cannedConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
}
func (c *cannedConn) SetDeadline(time.Time) error      { return nil }
func (c *cannedConn) SetReadDeadline(time.Time) error  { return nil }
func (c *cannedConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzUpstreamResponse: whatever the application answers, the forwarder
// either passes on a response a client can read, with no more body than
// the application sent, or reports an error (a 502); it never panics.
func FuzzUpstreamResponse(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nuntil close",
		"HTTP/1.1 000 Zero\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nConnection: X-A, close\r\nX-A: 1\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\n",
		"HTTP/1.1 101 Switching Protocols\r\n\r\n",
		"garbage",
	} {
		f.Add([]byte(seed), false)
	}
	f.Fuzz(func(t *testing.T, answer []byte, head bool) {
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		r := httptest.NewRequest(method, "/", nil)
		fw := &forwarder{host: "app.test"}
		c := newUpstreamConn(&cannedConn{answer: bytes.NewReader(answer)})
		resp, _, err := fw.exchange(c, r)
		if err != nil {
			return
		}
		if resp.StatusCode < 200 || resp.StatusCode > 999 {
			t.Fatalf("passed on status %d", resp.StatusCode)
		}
		w := httptest.NewRecorder()
		reusable, broken := copyResponse(w, resp)
		if w.Code != resp.StatusCode {
			t.Fatalf("client got %d, application said %d", w.Code, resp.StatusCode)
		}
		if w.Body.Len() > len(answer) {
			t.Fatalf("client got %d body bytes from a %d-byte answer", w.Body.Len(), len(answer))
		}
		if reusable && broken {
			t.Fatal("a connection whose body broke off would be reused")
		}
		for k := range w.Header() {
			if isHopByHop(k) && k != "Trailer" {
				t.Fatalf("hop-by-hop header %s passed on", k)
			}
			if strings.ContainsAny(k, "\r\n") {
				t.Fatalf("header name %q", k)
			}
		}
		_, _ = io.Copy(io.Discard, c.br)
	})
}
