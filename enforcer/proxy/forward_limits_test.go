package proxy

import (
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

	"github.com/sluice-dev/sluice/internal/testing/rawapp"
)

// TestResponseHeaderTimeout: an application that never answers costs its
// client a 504 after the timeout, and its connection; one that answers in
// time may take as long as it likes over the body.
func TestResponseHeaderTimeout(t *testing.T) {
	for _, path := range forwardPaths {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			closed := make(chan struct{}, 4)
			app := rawapp.Serve(t, func(conn net.Conn, sent *rawapp.Request) bool {
				if sent.Req.URL.Path == "/slow-body" {
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

// TestMaxRequestBody: a declared body over the limit is refused before
// anything reaches the application; a chunked one that grows over it is
// cut off, and the application never gets it whole.
func TestMaxRequestBody(t *testing.T) {
	for _, path := range forwardPaths {
		t.Run(path, func(t *testing.T) {
			g := NewWithT(t)
			var whole atomic.Int32
			app := rawapp.Serve(t, func(conn net.Conn, sent *rawapp.Request) bool {
				whole.Add(1)
				_, err := fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(sent.Body), sent.Body)
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
