package transport

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/rawapp"
)

// padding makes a response longer than the forwarder's read buffer, so
// that what follows it is still in the socket when the response is over.
var padding = strings.Repeat("p", 20<<10)

// smuggled is a whole response an application sends unasked, marked with
// the exchange it came from.
func smuggled(id string) string {
	body := "smuggled-" + id
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Marker: %s\r\n\r\n%s", len(body), body, body)
}

// brokenAnswers are applications that answer a request twice: what they
// answer (marked with the request's id), then unsolicited bytes.
var brokenAnswers = []struct {
	name   string
	method string
	status int
	answer func(id string) (resp, extra string)
}{
	{"a second response", http.MethodGet, http.StatusOK, func(id string) (string, string) {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Marker: %s\r\n\r\n%s%s", len(id+padding), id, id, padding), smuggled(id)
	}},
	{"a short Content-Length", http.MethodGet, http.StatusOK, func(id string) (string, string) {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Marker: %s\r\n\r\n%s%s", len(id+padding), id, id, padding),
			"and the rest of the body" + smuggled(id)
	}},
	{"a body on HEAD", http.MethodHead, http.StatusOK, func(id string) (string, string) {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Marker: %s\r\n\r\n", len(smuggled(id)), id), smuggled(id)
	}},
	{"a body on 204", http.MethodGet, http.StatusNoContent, func(id string) (string, string) {
		return fmt.Sprintf("HTTP/1.1 204 No Content\r\nX-Marker: %s\r\n\r\n", id), smuggled(id)
	}},
}

// TestBrokenApplicationNeverDesyncs: an application that answers twice
// never gets its second answer to another client, on either path, whether
// the unsolicited bytes come with the response or while the connection is
// idle, with clients one after the other or at once.
func TestBrokenApplicationNeverDesyncs(t *testing.T) {
	timings := []struct {
		name       string
		late       bool // the extra bytes come after a pause, while the connection is idle
		clients    int
		requests   int
		pauseAfter time.Duration
	}{
		{"with the response, sequential", false, 1, 30, 0},
		{"with the response, concurrent", false, 8, 25, 0},
		{"while idle", true, 1, 6, 60 * time.Millisecond},
	}
	for _, path := range forwardPaths {
		for _, b := range brokenAnswers {
			for _, timing := range timings {
				t.Run(path+"/"+b.name+"/"+timing.name, func(t *testing.T) {
					g := NewWithT(t)
					app := rawapp.Serve(t, func(conn net.Conn, sent *rawapp.Request) bool {
						resp, extra := b.answer(strings.TrimPrefix(sent.Req.URL.Path, "/r/"))
						if !timing.late {
							_, err := io.WriteString(conn, resp+extra) // one write: the bytes arrive together
							return err == nil
						}
						if _, err := io.WriteString(conn, resp); err != nil {
							return false
						}
						time.Sleep(20 * time.Millisecond)
						_, err := io.WriteString(conn, extra)
						return err == nil
					})
					f := serveWith(t, path, Options{}, app)
					var wg sync.WaitGroup
					for client := range timing.clients {
						wg.Go(func() {
							for i := range timing.requests {
								id := fmt.Sprintf("c%d-%d", client, i)
								req, _ := http.NewRequest(b.method, f.url+"/r/"+id, nil)
								resp, err := http.DefaultClient.Do(req)
								g.Expect(err).NotTo(HaveOccurred())
								body, err := io.ReadAll(resp.Body)
								resp.Body.Close()
								g.Expect(err).NotTo(HaveOccurred())
								g.Expect(resp.StatusCode).To(Equal(b.status), "request %s got %q", id, body)
								g.Expect(resp.Header.Get("X-Marker")).To(Equal(id), "request %s", id)
								if b.method == http.MethodGet && b.status == http.StatusOK {
									g.Expect(string(body)).To(Equal(id+padding), "request %s", id)
								} else {
									g.Expect(body).To(BeEmpty(), "request %s", id)
								}
								time.Sleep(timing.pauseAfter)
							}
						})
					}
					wg.Wait()
				})
			}
		}
	}
}
