package enforcer

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestSlowBodiesAreCutOff trickles request bodies into the enforcer, a byte
// at a time, and checks that each is cut off at its flag's time with 408,
// and that the application never holds the request: a short body is read
// whole before any connection to the application is taken, a long one is
// streamed and its upstream request aborted.
func TestSlowBodiesAreCutOff(t *testing.T) {
	var received, completed atomic.Int32
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		if _, err := io.Copy(io.Discard, r.Body); err == nil {
			completed.Add(1)
		}
	}))
	t.Cleanup(app.Close)
	e := start(t, setup{policies: policy("slow", sharedLimit), upstream: app.URL,
		args: []string{"--body-timeout", "1500ms", "--body-idle-timeout", "700ms"}})

	cases := map[string]struct {
		length   int
		interval time.Duration // between bytes
		// cutAfter is the flag that should end the body.
		cutAfter time.Duration
		// grpc claims a gRPC content type, which earns no leeway on
		// HTTP/1.1: the answer is then a gRPC status.
		grpc bool
	}{
		"short body, steady trickle (body timeout)":     {length: 100, interval: 200 * time.Millisecond, cutAfter: 1500 * time.Millisecond},
		"short body, one long pause (idle timeout)":     {length: 100, interval: 2 * time.Second, cutAfter: 700 * time.Millisecond},
		"streamed body, steady trickle":                 {length: 200 << 10, interval: 200 * time.Millisecond, cutAfter: 1500 * time.Millisecond},
		"gRPC content type on HTTP/1.1, one long pause": {length: 100, interval: 2 * time.Second, cutAfter: 700 * time.Millisecond, grpc: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
			g.Expect(err).NotTo(HaveOccurred())
			defer conn.Close()
			began := time.Now()
			contentType := "application/octet-stream"
			if c.grpc {
				contentType = "application/grpc"
			}
			fmt.Fprintf(conn, "POST /upload HTTP/1.1\r\nHost: app\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", contentType, c.length)
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for i := 0; i < c.length; i++ {
					select {
					case <-stop:
						return
					case <-time.After(c.interval):
					}
					if _, err := conn.Write([]byte{'x'}); err != nil {
						return
					}
				}
			}()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			took := time.Since(began)
			g.Expect(err).NotTo(HaveOccurred(), "the enforcer answers a slow body")
			resp.Body.Close()
			if c.grpc {
				g.Expect(resp.Header.Get("Grpc-Status")).To(Equal("4"), "DEADLINE_EXCEEDED: %v\n%s", resp.Header, e.logs)
			} else {
				g.Expect(resp.StatusCode).To(Equal(http.StatusRequestTimeout), "%v\n%s", resp.Header, e.logs)
				g.Expect(resp.Header.Get("Content-Type")).To(Equal("application/problem+json"))
			}
			g.Expect(took).To(BeNumerically(">=", c.cutAfter-100*time.Millisecond), "not before the documented time")
			g.Expect(took).To(BeNumerically("<", c.cutAfter+2*time.Second), "soon after it")
		})
	}
	g := NewWithT(t)
	g.Expect(completed.Load()).To(BeZero(), "no trickled body ever reached the application whole")
	g.Expect(received.Load()).To(BeNumerically("<=", 1), "only the streamed body was started upstream")
	g.Expect(get(t, e.admin+"/metrics").body).To(ContainSubstring(`sluice_enforcer_requests_refused_total{reason="body-timeout"}`))
}
