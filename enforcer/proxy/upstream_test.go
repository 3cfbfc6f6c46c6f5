package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestUpgradePassesThrough opens a WebSocket-style upgrade through the
// proxy and exchanges bytes both ways over the hijacked connection.
func TestUpgradePassesThrough(t *testing.T) {
	g := NewWithT(t)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" || r.Header.Get("Connection") != "Upgrade" {
			http.Error(w, "not an upgrade", http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = rw.Flush()
		line, _ := rw.ReadString('\n')
		fmt.Fprintf(rw, "echo %s", line)
		_ = rw.Flush()
	})
	f := serve(t, configOf(t, policyJSON("api", "Enforce", "Open", "XRateLimit", ruleJSON("all", "{}", "TokenBucket", "10/1m"))), redisURL, app)

	conn, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: example.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close() // the upgraded connection is read through br
	g.Expect(resp.StatusCode).To(Equal(http.StatusSwitchingProtocols))
	g.Expect(resp.Header.Get("X-RateLimit-Remaining")).To(Equal("9"), "the handshake was decided")
	fmt.Fprint(conn, "hello\n")
	line, err := br.ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(line).To(Equal("echo hello\n"))
}

// TestStreamingIsFlushed reads each event of a streamed response before the
// application has written the next.
func TestStreamingIsFlushed(t *testing.T) {
	g := NewWithT(t)
	next := make(chan struct{})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	})
	f := serve(t, configOf(t, policyJSON("api", "Enforce", "Open", "None", ruleJSON("all", "{}", "TokenBucket", "10/1m"))), redisURL, app)
	resp, err := http.Get(f.url + "/events")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(line).To(Equal(fmt.Sprintf("data: %d\n", i)))
		_, _ = br.ReadString('\n')
		next <- struct{}{}
	}
	rest, _ := io.ReadAll(br)
	g.Expect(rest).To(BeEmpty())
}
