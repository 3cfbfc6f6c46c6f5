package enforcer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func runBinary(args ...string) (string, error) {
	out, err := exec.Command(binary, args...).CombinedOutput()
	return string(out), err
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

const sharedLimit = `  identity: {sources: [{shared: {}}]}
  rules:
    - name: all
      algorithm: TokenBucket
      limits: [{requests: 1000, period: 1m}]`

// TestWebSocketUpgrade opens a WebSocket handshake through the enforcer and
// exchanges bytes both ways on the upgraded connection.
func TestWebSocketUpgrade(t *testing.T) {
	g := NewWithT(t)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
		_ = rw.Flush()
		for {
			line, err := rw.ReadString('\n')
			if err != nil {
				return
			}
			fmt.Fprintf(rw, "echo %s", line)
			_ = rw.Flush()
		}
	}))
	defer app.Close()
	e := start(t, setup{policies: policy("ws", sharedLimit), upstream: app.URL})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(conn, "GET /socket HTTP/1.1\r\nHost: chat.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close() // the upgraded connection is read through br
	g.Expect(resp.StatusCode).To(Equal(101))
	g.Expect(resp.Header.Get("Sec-WebSocket-Accept")).To(Equal("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))
	g.Expect(resp.Header.Get("X-RateLimit-Limit")).To(Equal("1000"))
	for _, msg := range []string{"one", "two"} {
		fmt.Fprintf(conn, "%s\n", msg)
		line, err := br.ReadString('\n')
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(line).To(Equal("echo " + msg + "\n"))
	}
}

// TestStreamedResponse reads each chunk of a streamed response while the
// application is still producing the next.
func TestStreamedResponse(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "chunk %d\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-time.After(10 * time.Second):
				return
			}
		}
	}))
	defer app.Close()
	e := start(t, setup{policies: policy("stream", sharedLimit), upstream: app.URL})
	resp, err := client.Get(e.url + "/download")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(line).To(Equal(fmt.Sprintf("chunk %d\n", i)), "chunk %d arrived before the application wrote the next", i)
		release <- struct{}{}
	}
	rest, _ := io.ReadAll(br)
	g.Expect(rest).To(BeEmpty())
}

// TestGracefulShutdownDrains: on SIGTERM a request in flight completes, new
// connections are refused, and the process exits 0.
func TestGracefulShutdownDrains(t *testing.T) {
	g := NewWithT(t)
	entered := make(chan struct{}, 1)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		time.Sleep(time.Second)
		_, _ = io.WriteString(w, "done")
	}))
	defer app.Close()
	e := start(t, setup{policies: policy("drain", sharedLimit), upstream: app.URL})
	result := make(chan response, 1)
	go func() { result <- get(t, e.url+"/slow") }()
	<-entered
	g.Expect(e.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Eventually(func() error {
		c, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
		if err == nil {
			c.Close()
		}
		return err
	}, 2*time.Second, 20*time.Millisecond).Should(HaveOccurred(), "the listener closes at once")
	r := <-result
	g.Expect(r.status).To(Equal(200))
	g.Expect(r.body).To(Equal("done"))
	g.Eventually(e.exited, 5*time.Second).Should(BeClosed())
	g.Expect(e.exitErr).NotTo(HaveOccurred(), e.logs.String())
	g.Expect(e.logs.String()).To(ContainSubstring(`"msg":"stopped"`))
}
