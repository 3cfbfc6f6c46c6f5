package transport

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/enforcer/request"
)

// FuzzUpstreamResponse: whatever the application answers, the forwarder
// either passes on a response a client can read, with no more body than
// the application sent, or reports an error (a 502); it never panics. And
// a connection it takes again for the next request carries nothing of the
// first answer, nor of what the application wrote while it was idle: the
// next response is the application's next one, whole.
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
		// Unsolicited bytes after a complete response.
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled",
		"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled",
		"HTTP/1.1 200 OK\r\nContent-Length: 44\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxy",
	} {
		f.Add([]byte(seed), []byte(nil), false)
		f.Add([]byte(seed), []byte(nil), true)
	}
	for _, idle := range []string{"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled", "x"} {
		f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), []byte(idle), false)
		f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"), []byte(idle), true)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	const next = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Exchange: second\r\n\r\nnext"
	f.Fuzz(func(t *testing.T, answer, idle []byte, head bool) {
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		app, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer app.Close()
		// The application's side never reads: what it answers is on the
		// way before the request is.
		go func() { _, _ = io.Copy(io.Discard, app) }()
		if _, err := app.Write(answer); err != nil {
			t.Fatal(err)
		}
		fw := &forwarder{host: "app.test", maxIdle: 1, idleTimeout: time.Minute}
		c := newUpstreamConn(client)
		defer c.conn.Close()
		_ = c.conn.SetDeadline(time.Now().Add(100 * time.Millisecond)) // an answer cut short ends here
		r := httptest.NewRequest(method, "/", nil)
		w := &finalRecorder{httptest.NewRecorder()}
		resp, _, err := fw.exchange(c, w, r, nil)
		if err != nil {
			return
		}
		if resp.StatusCode < 200 || resp.StatusCode > 999 {
			t.Fatalf("passed on status %d", resp.StatusCode)
		}
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
			if request.IsHopByHop(k) && k != "Trailer" {
				t.Fatalf("hop-by-hop header %s passed on", k)
			}
			if strings.ContainsAny(k, "\r\n") {
				t.Fatalf("header name %q", k)
			}
		}
		if !reusable {
			return
		}
		if len(idle) > 0 {
			if _, err := app.Write(idle); err != nil {
				t.Fatal(err)
			}
			waitReadable(t, c)
		}
		_ = c.conn.SetDeadline(time.Time{})
		fw.put(c)
		again, _ := fw.get()
		if fw.pruner != nil {
			fw.pruner.Stop()
		}
		if again == nil {
			return // the connection was found out of step
		}
		if _, err := io.WriteString(app, next); err != nil {
			t.Fatal(err)
		}
		_ = again.conn.SetDeadline(time.Now().Add(time.Second))
		w = &finalRecorder{httptest.NewRecorder()}
		resp, _, err = fw.exchange(again, w, httptest.NewRequest(http.MethodGet, "/next", nil), nil)
		if err != nil {
			t.Fatalf("the reused connection gave no response: %v", err)
		}
		copyResponse(w, resp)
		if got := w.Header().Get("X-Exchange"); w.Code != http.StatusOK || got != "second" || w.Body.String() != "next" {
			t.Fatalf("the next request on the connection got %d %q %q: bytes of the first answer", w.Code, got, w.Body.String())
		}
	})
}

// finalRecorder records the final response; 1xx answers go by.
type finalRecorder struct{ *httptest.ResponseRecorder }

func (w *finalRecorder) WriteHeader(code int) {
	if code >= 200 {
		w.ResponseRecorder.WriteHeader(code)
	}
}

// waitReadable waits until bytes written to c by the application have
// arrived, as they would have in the time a connection lies idle.
func waitReadable(t *testing.T, c *upstreamConn) {
	for range 100 {
		if !alive(c) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the application's bytes never arrived")
}
