package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestResponseHeaderTimeout: an application that never answers costs its
// client a 504 after the timeout, and its connection; one that answers in
// time may take as long as it likes over the body.
func TestResponseHeaderTimeout(t *testing.T) {
	for _, path := range forwardPaths {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			closed := make(chan struct{}, 4)
			app := rawApp(t, func(conn net.Conn, sent *sentRequest) bool {
				if sent.req.URL.Path == "/slow-body" {
					_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n")
					time.Sleep(500 * time.Millisecond)
					_, err := io.WriteString(conn, "done")
					return err == nil
				}
				_, _ = io.Copy(io.Discard, conn) // until the enforcer hangs up
				closed <- struct{}{}
				return false
			})
			f := serveWith(t, path, Options{ResponseHeaderTimeout: 200 * time.Millisecond}, app)
			client := &http.Client{Timeout: 3 * time.Second}
			resp, err := client.Get(f.url + "/hung")
			g.Expect(err).NotTo(HaveOccurred(), "answered before the client gives up")
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusGatewayTimeout))
			g.Expect(resp.Header.Get("Content-Type")).To(Equal("application/problem+json"))
			g.Expect(string(body)).To(ContainSubstring(ProblemUpstreamTimeout))
			g.Eventually(closed).Should(Receive(), "the connection is closed")

			r := get(g, f.url+"/slow-body")
			g.Expect(r.status).To(Equal(http.StatusOK))
			g.Expect(r.body).To(Equal("done"))
		})
	}
}

// TestEarlyHints: a 103 reaches the client with the application's fields
// only, the rate limit headers on the final response; a 100 Continue the
// application sends unasked is not relayed.
func TestEarlyHints(t *testing.T) {
	app := rawApp(t, func(conn net.Conn, _ *sentRequest) bool {
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
				g.Expect(hints.Header).NotTo(HaveKey(headerLimit))
				g.Expect(hints.Header).NotTo(HaveKey(headerRemaining))

				final, err := http.ReadResponse(br, nil)
				g.Expect(err).NotTo(HaveOccurred())
				body, _ := io.ReadAll(final.Body)
				final.Body.Close()
				g.Expect(final.StatusCode).To(Equal(http.StatusOK))
				g.Expect(string(body)).To(Equal("final"))
				g.Expect(final.Header.Get("X-App")).To(Equal("final"))
				g.Expect(final.Header.Get(headerLimit)).To(Equal("1000000"))
				g.Expect(final.Header.Values(headerLimit)).To(HaveLen(1))
				g.Expect(final.Header.Get(headerRemaining)).NotTo(BeEmpty())
				g.Expect(final.Header).NotTo(HaveKey("Link"))
			}
		})
	}
}

// TestMaxRequestBody: a declared body over the limit is refused before
// anything reaches the application; a chunked one that grows over it is
// cut off, and the application never gets it whole.
func TestMaxRequestBody(t *testing.T) {
	for _, path := range forwardPaths {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			var whole atomic.Int32
			app := rawApp(t, func(conn net.Conn, sent *sentRequest) bool {
				whole.Add(1)
				_, err := fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(sent.body), sent.body)
				return err == nil
			})
			f := serveWith(t, path, Options{MaxRequestBody: 1000}, app)
			post := func(body io.Reader) (int, Problem) {
				resp, err := http.Post(f.url+"/upload", "text/plain", body)
				g.Expect(err).NotTo(HaveOccurred())
				defer resp.Body.Close()
				var p Problem
				if resp.StatusCode != http.StatusOK {
					g.Expect(json.NewDecoder(resp.Body).Decode(&p)).To(Succeed())
				}
				return resp.StatusCode, p
			}
			status, p := post(strings.NewReader(strings.Repeat("x", 1001)))
			g.Expect(status).To(Equal(http.StatusRequestEntityTooLarge))
			g.Expect(p.Type).To(Equal(ProblemRequestLimit))
			g.Expect(whole.Load()).To(BeZero(), "nothing reached the application")

			// io.MultiReader hides the length: the client sends it chunked.
			status, _ = post(io.MultiReader(strings.NewReader(strings.Repeat("y", 500))))
			g.Expect(status).To(Equal(http.StatusOK), "under the limit")
			g.Expect(whole.Load()).To(Equal(int32(1)))

			status, p = post(io.MultiReader(strings.NewReader(strings.Repeat("z", 5000))))
			g.Expect(status).To(Equal(http.StatusRequestEntityTooLarge))
			g.Expect(p.Type).To(Equal(ProblemRequestLimit))
			g.Consistently(whole.Load, 200*time.Millisecond).Should(Equal(int32(1)), "the application never got it whole")
			g.Expect(f.rec.refusals("body-too-large")).To(Equal(2), "each refusal counted")
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
