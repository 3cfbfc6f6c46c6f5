package transport

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/rawapp"
)

// TestBodiesArriveIntact sends bodies of each size and framing; small ones
// take the forwarder, large and chunked ones the reverse proxy.
func TestBodiesArriveIntact(t *testing.T) {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%s %d %s %d", r.Method, r.ContentLength, r.Header.Get("Content-Type"), len(body))
		_, _ = w.Write(body)
	})
	for _, path := range forwardPaths {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			f := serveVia(t, path, app)
			for _, size := range []int{0, 1, 4 << 10, maxForwardBody, maxForwardBody + 1, 1 << 20} {
				body := strings.Repeat("x", size)
				resp, err := http.Post(f.url+"/upload", "application/json", strings.NewReader(body))
				g.Expect(err).NotTo(HaveOccurred())
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
				g.Expect(string(got)).To(Equal(fmt.Sprintf("POST %d application/json %d%s", size, size, body)), "size %d", size)
			}
			// Unknown length: the client sends it chunked.
			resp, err := http.Post(f.url+"/upload", "text/plain", io.MultiReader(strings.NewReader("chunked "), strings.NewReader("body")))
			g.Expect(err).NotTo(HaveOccurred())
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			g.Expect(string(got)).To(Equal("POST -1 text/plain 12chunked body"))
		})
	}
}

// TestResponsesWithoutBody: HEAD, 204 and 304 keep their headers and have
// no body, and the connection serves the next request.
func TestResponsesWithoutBody(t *testing.T) {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		switch r.URL.Path {
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/cached":
			w.WriteHeader(http.StatusNotModified)
		default:
			_, _ = io.WriteString(w, "hello")
		}
	})
	for _, path := range forwardPaths {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			f := serveVia(t, path, app)
			resp, err := http.Head(f.url + "/page")
			g.Expect(err).NotTo(HaveOccurred())
			resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
			g.Expect(resp.ContentLength).To(Equal(int64(5)), "HEAD keeps the length of what GET would send")
			for _, c := range []struct {
				path   string
				status int
			}{{"/empty", 204}, {"/cached", 304}, {"/page", 200}} {
				r := get(g, f.url+c.path)
				g.Expect(r.status).To(Equal(c.status))
				g.Expect(r.header.Get("ETag")).To(Equal(`"v1"`))
				g.Expect(r.header.Get("X-RateLimit-Limit")).NotTo(BeEmpty())
			}
		})
	}
}

// TestTrailersPassThrough: trailers of a chunked response reach the client.
func TestTrailersPassThrough(t *testing.T) {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		_, _ = io.WriteString(w, "part one, ")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "part two")
		w.Header().Set("X-Checksum", "abc123")
		w.Header().Set(http.TrailerPrefix+"X-Undeclared", "late")
	})
	for _, path := range forwardPaths {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			f := serveVia(t, path, app)
			resp, err := http.Get(f.url + "/")
			g.Expect(err).NotTo(HaveOccurred())
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			g.Expect(string(body)).To(Equal("part one, part two"))
			g.Expect(resp.Trailer.Get("X-Checksum")).To(Equal("abc123"))
			g.Expect(resp.Trailer.Get("X-Undeclared")).To(Equal("late"))
		})
	}
}

// TestHopByHopResponseHeaders: headers about the application's connection
// stay there.
func TestHopByHopResponseHeaders(t *testing.T) {
	app := rawapp.Serve(t, func(conn net.Conn, _ *rawapp.Request) bool {
		_, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\nConnection: X-Internal\r\nX-Internal: hop\r\n"+
			"Keep-Alive: timeout=5\r\nX-Kept: end-to-end\r\nContent-Length: 0\r\n\r\n")
		return err == nil
	})
	for _, path := range forwardPaths {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			f := serveWith(t, path, Options{}, app)
			r := get(g, f.url+"/")
			g.Expect(r.header.Get("X-Kept")).To(Equal("end-to-end"))
			g.Expect(r.header.Get("X-Internal")).To(BeEmpty())
			g.Expect(r.header.Get("Keep-Alive")).To(BeEmpty())
		})
	}
}

// TestConnectionsAreReused: sequential requests share one kept-alive
// connection to the application.
func TestConnectionsAreReused(t *testing.T) {
	g := NewWithT(t)
	var conns atomic.Int32
	app := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	app.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	app.Start()
	t.Cleanup(app.Close)
	f := serveWith(t, "forwarder", Options{}, app.URL)
	for range 50 {
		g.Expect(get(g, f.url+"/").body).To(Equal("ok"))
		resp, err := http.Post(f.url+"/", "text/plain", strings.NewReader("body"))
		g.Expect(err).NotTo(HaveOccurred())
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	g.Expect(conns.Load()).To(Equal(int32(1)))
}

// scripted is an application on a raw socket: each connection answers
// requests with the given responses in turn, then closes, saying nothing.
func scripted(t *testing.T, responses ...string) (url string, requests *atomic.Int32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	requests = &atomic.Int32{}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for _, resp := range responses {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					requests.Add(1)
					if _, err := io.WriteString(conn, resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), requests
}

// TestApplicationClosesIdleConnections: an application that drops a kept-
// alive connection after one request (as servers do after their idle
// timeout) costs the client nothing, whatever the method.
func TestApplicationClosesIdleConnections(t *testing.T) {
	g := NewWithT(t)
	app, requests := scripted(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	f := serveWith(t, "forwarder", Options{}, app)
	for i := range 6 {
		var resp *http.Response
		var err error
		if i%2 == 0 {
			resp, err = http.Get(f.url + "/")
		} else {
			resp, err = http.Post(f.url+"/", "text/plain", strings.NewReader("once"))
		}
		g.Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), "request %d", i)
		g.Expect(string(body)).To(Equal("ok"))
		// Wait for the close to reach the enforcer: a request that cannot
		// be sent twice relies on seeing it, as with any proxy.
		g.Eventually(func() [2]int {
			idle, closed := f.upstream.forwarder.pooled()
			return [2]int{idle, closed}
		}).Should(Equal([2]int{1, 1}), "request %d: its connection pooled, and seen closed", i)
	}
	g.Expect(requests.Load()).To(Equal(int32(6)), "no request reached the application twice")
}

// TestBrokenResponses: a response cut short reaches the client as cut
// short, never as complete; a garbled one is a 502.
func TestBrokenResponses(t *testing.T) {
	g := NewWithT(t)
	short, _ := scripted(t, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..")
	f := serveWith(t, "forwarder", Options{}, short)
	resp, err := http.Get(f.url + "/")
	if err == nil { // the headers may have been sent before the body broke
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	g.Expect(err).To(HaveOccurred(), "a body cut short is never taken as complete")

	garbled, _ := scripted(t, "HTTP/1.1 two hundred\r\n\r\n")
	f = serveWith(t, "forwarder", Options{}, garbled)
	g.Expect(get(g, f.url+"/").status).To(Equal(http.StatusBadGateway))

	unasked, _ := scripted(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	f = serveWith(t, "forwarder", Options{}, unasked)
	g.Expect(get(g, f.url+"/").status).To(Equal(http.StatusBadGateway))

	hints, _ := scripted(t, "HTTP/1.1 103 Early Hints\r\nLink: </app.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal")
	f = serveWith(t, "forwarder", Options{}, hints)
	g.Expect(get(g, f.url+"/").body).To(Equal("final"))
}

// TestClientHangUpReachesApplication: when the client gives up on a long
// poll, the application's request is cancelled too.
func TestClientHangUpReachesApplication(t *testing.T) {
	g := NewWithT(t)
	started, gone := make(chan struct{}), make(chan struct{})
	var once sync.Once
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(started) })
		select {
		case <-r.Context().Done():
			close(gone)
		case <-time.After(10 * time.Second):
		}
	})
	f := serveVia(t, "forwarder", app)
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
	g.Expect(err).NotTo(HaveOccurred())
	fmt.Fprint(conn, "GET /poll HTTP/1.1\r\nHost: example.test\r\n\r\n")
	g.Eventually(started).Should(BeClosed())
	conn.Close()
	g.Eventually(gone, 5*time.Second).Should(BeClosed())
}

// TestIdleConnectionsAreClosed: connections idle for longer than the idle
// timeout are closed, so that a burst does not hold the application's
// sockets for ever.
func TestIdleConnectionsAreClosed(t *testing.T) {
	g := NewWithT(t)
	var open atomic.Int32
	app := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(10 * time.Millisecond) // concurrent requests need connections of their own
	}))
	app.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	app.Start()
	t.Cleanup(app.Close)
	f := serveWith(t, "forwarder", Options{}, app.URL)
	f.upstream.forwarder.idleTimeout = 200 * time.Millisecond
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { get(g, f.url+"/") })
	}
	wg.Wait()
	g.Expect(open.Load()).To(BeNumerically(">", 1))
	g.Eventually(open.Load, 2*time.Second).Should(BeZero())
	g.Expect(get(g, f.url+"/").status).To(Equal(http.StatusOK), "a new connection after the pool emptied")
}

// TestRequestAsSent reads the bytes the application receives on each path:
// the target, one Host, one Content-Length, the header fields in full, the
// forwarding headers exactly as the handler set them, and nothing that was
// meant for the enforcer only.
func TestRequestAsSent(t *testing.T) {
	for _, path := range forwardPaths {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			heads := make(chan *rawapp.Request, 1)
			app := rawapp.Serve(t, func(conn net.Conn, sent *rawapp.Request) bool {
				heads <- sent
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				return true
			})
			conn, err := net.Dial("tcp", strings.TrimPrefix(pathOnly(t, path, Options{}, app), "http://"))
			g.Expect(err).NotTo(HaveOccurred())
			defer conn.Close()
			fmt.Fprint(conn, "POST /orders;v=1?page=2&a;b HTTP/1.1\r\nHost: shop.example.com\r\nContent-Length: 5\r\n"+
				"Content-Type: text/plain\r\nAccept: a/b\r\nAccept: c/d\r\nX-Forwarded-For: 203.0.113.9, 10.0.0.1\r\n"+
				"X-Forwarded-Host: shop.example.com\r\nX-Forwarded-Proto: https\r\nForwarded: for=203.0.113.9\r\n"+
				"Connection: keep-alive, X-Secret\r\nX-Secret: hop\r\nKeep-Alive: timeout=5\r\nProxy-Authorization: Basic eDp5\r\n"+
				"Expect: 100-continue\r\n\r\nhello")
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			g.Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusContinue), "the enforcer answers Expect")
			resp, err = http.ReadResponse(br, nil)
			g.Expect(err).NotTo(HaveOccurred())
			resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))

			var sent *rawapp.Request
			g.Eventually(heads).Should(Receive(&sent))
			lines := strings.Split(strings.TrimSuffix(sent.Head, "\r\n\r\n"), "\r\n")
			g.Expect(lines[0]).To(Equal("POST /orders;v=1?page=2&a;b HTTP/1.1"))
			g.Expect(lines).To(ContainElements(
				"Host: shop.example.com", "Content-Length: 5", "Content-Type: text/plain", "Accept: a/b", "Accept: c/d",
				"X-Forwarded-For: 203.0.113.9, 10.0.0.1", "X-Forwarded-Host: shop.example.com", "X-Forwarded-Proto: https",
				"Forwarded: for=203.0.113.9"))
			count := func(prefix string) (n int) {
				for _, l := range lines {
					if strings.HasPrefix(strings.ToLower(l), strings.ToLower(prefix)) {
						n++
					}
				}
				return n
			}
			for _, once := range []string{"Host:", "Content-Length:", "X-Forwarded-For:", "X-Forwarded-Host:", "X-Forwarded-Proto:", "Forwarded:"} {
				g.Expect(count(once)).To(Equal(1), once)
			}
			for _, hop := range []string{"Connection:", "X-Secret:", "Keep-Alive:", "Proxy-Authorization:", "User-Agent:", "Expect:"} {
				g.Expect(count(hop)).To(BeZero(), hop)
			}
			g.Expect(string(sent.Body)).To(Equal("hello"))
		})
	}
}

// TestExpectContinue: a client that waits for 100 Continue before sending
// its body (curl does for bodies over 1 KiB) gets it, and its body arrives.
func TestExpectContinue(t *testing.T) {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %s", body)
	})
	for _, path := range forwardPaths {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			f := serveVia(t, path, app)
			conn, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
			g.Expect(err).NotTo(HaveOccurred())
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprint(conn, "POST /upload HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
			br := bufio.NewReader(conn)
			cont, err := http.ReadResponse(br, nil)
			g.Expect(err).NotTo(HaveOccurred())
			cont.Body.Close()
			g.Expect(cont.StatusCode).To(Equal(http.StatusContinue), "the body is asked for")
			fmt.Fprint(conn, "hello")
			resp, err := http.ReadResponse(br, nil)
			g.Expect(err).NotTo(HaveOccurred())
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
			g.Expect(string(body)).To(Equal("got hello"))
			g.Expect(resp.Header.Get("X-RateLimit-Remaining")).NotTo(BeEmpty(), "the limit headers are on the final response")
		})
	}
}

// TestHugeResponseHead: an application sending megabytes of headers gets
// its client a 502, not an enforcer holding them all in memory.
func TestHugeResponseHead(t *testing.T) {
	for _, path := range forwardPaths {
		t.Run(path, func(t *testing.T) { testHugeResponseHead(t, path) })
	}
}

func testHugeResponseHead(t *testing.T, path string) {
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = http.ReadRequest(bufio.NewReader(conn))
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("x", 1000) + "\r\n"
		for range 4 << 10 { // 4 MiB of headers, or until the enforcer hangs up
			if _, err := io.WriteString(conn, line); err != nil {
				return
			}
		}
		_, _ = io.WriteString(conn, "Content-Length: 0\r\n\r\n")
		_, _ = conn.Read(make([]byte, 1)) // until the enforcer hangs up
	}()
	f := serveWith(t, path, Options{}, "http://"+ln.Addr().String())
	g.Expect(get(g, f.url+"/").status).To(Equal(http.StatusBadGateway))
}

// TestEarlyHints: a 103 reaches the client with the application's fields
// only, the rate limit headers on the final response; a 100 Continue the
// application sends unasked is not relayed.
func TestEarlyHints(t *testing.T) {
	app := rawapp.Serve(t, func(conn net.Conn, _ *rawapp.Request) bool {
		_, err := io.WriteString(conn, "HTTP/1.1 100 Continue\r\n\r\n"+
			"HTTP/1.1 103 Early Hints\r\nLink: </app.css>; rel=preload\r\n\r\n"+
			"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-App: final\r\n\r\nfinal")
		return err == nil
	})
	for _, path := range forwardPaths {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			f := serveWith(t, path, Options{}, app)
			conn, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
			g.Expect(err).NotTo(HaveOccurred())
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(conn)
			for range 2 { // the second on a kept-alive connection: the map is restored
				fmt.Fprint(conn, "GET /page HTTP/1.1\r\nHost: example.test\r\n\r\n")
				hints, err := http.ReadResponse(br, nil)
				g.Expect(err).NotTo(HaveOccurred())
				_ = hints.Body.Close() // a 1xx has no body
				g.Expect(hints.StatusCode).To(Equal(http.StatusEarlyHints))
				g.Expect(hints.Header.Get("Link")).To(Equal("</app.css>; rel=preload"))
				g.Expect(hints.Header).NotTo(HaveKey("X-Ratelimit-Limit"))
				g.Expect(hints.Header).NotTo(HaveKey("X-Ratelimit-Remaining"))

				final, err := http.ReadResponse(br, nil)
				g.Expect(err).NotTo(HaveOccurred())
				body, _ := io.ReadAll(final.Body)
				final.Body.Close()
				g.Expect(final.StatusCode).To(Equal(http.StatusOK))
				g.Expect(string(body)).To(Equal("final"))
				g.Expect(final.Header.Get("X-App")).To(Equal("final"))
				g.Expect(final.Header.Get("X-RateLimit-Limit")).To(Equal("100"))
				g.Expect(final.Header.Values("X-RateLimit-Limit")).To(HaveLen(1))
				g.Expect(final.Header.Get("X-RateLimit-Remaining")).NotTo(BeEmpty())
				g.Expect(final.Header).NotTo(HaveKey("Link"))
			}
		})
	}
}

// TestEarlyAnswerToStreamedBody: an application that answers without
// reading a large body gets its answer to the client, and the connection,
// whose request was never all sent, is not used again.
func TestEarlyAnswerToStreamedBody(t *testing.T) {
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { ln.Close() })
	var conns atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if req.URL.Path == "/upload" { // answer at once, read nothing
					_, _ = io.WriteString(conn, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 4\r\n\r\nnope")
					_, _ = io.Copy(io.Discard, conn)
					return
				}
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}()
		}
	}()
	f := serveWith(t, "forwarder", Options{}, "http://"+ln.Addr().String())
	// A client that sends part of its body, then waits for the answer.
	client, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
	g.Expect(err).NotTo(HaveOccurred())
	defer client.Close()
	_ = client.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(client, "POST /upload HTTP/1.1\r\nHost: example.test\r\nContent-Length: %d\r\n\r\n%s", 32<<20, strings.Repeat("b", 1<<20))
	resp, err := http.ReadResponse(bufio.NewReader(client), nil)
	g.Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(string(body)).To(Equal("nope"))
	r := get(g, f.url+"/next")
	g.Expect(r.body).To(Equal("ok"))
	g.Expect(conns.Load()).To(Equal(int32(2)), "the next request took a new connection")
}
