package transport

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// h2Pair is an accepted connection wrapped as the enforcer's listener
// wraps it, and the client's end of it.
func h2Pair(t *testing.T, writeTimeout time.Duration) (server net.Conn, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	wrapped := H2Listener(ln, writeTimeout)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := wrapped.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return server, client
}

// TestH2ConnKeepsHTTP1AsItIs: a connection that does not open with the
// HTTP/2 preface reads and writes straight through, its write deadline
// the caller's.
func TestH2ConnKeepsHTTP1AsItIs(t *testing.T) {
	g := NewWithT(t)
	server, client := h2Pair(t, time.Minute)
	_, err := client.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	g.Expect(err).NotTo(HaveOccurred())
	buf := make([]byte, 64)
	n, err := server.Read(buf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(buf[:n])).To(Equal("GET / HTTP/1.1\r\n\r\n"))

	g.Expect(server.SetWriteDeadline(time.Now().Add(-time.Second))).To(Succeed())
	_, err = server.Write([]byte("HTTP/1.1 200 OK\r\n\r\n"))
	g.Expect(errors.Is(err, os.ErrDeadlineExceeded)).To(BeTrue(), "the write was the caller's own: %v", err)
}

// TestH2ConnCoalescesInOrder: after the preface, every write arrives, in
// order, and what is pending when the connection closes is sent before
// the close.
func TestH2ConnCoalescesInOrder(t *testing.T) {
	g := NewWithT(t)
	server, client := h2Pair(t, time.Minute)
	frames := "frame-1 frame-2 after-the-preface"
	go func() { _, _ = client.Write([]byte(h2Preface + frames)) }()

	// Read as net/http does: the preface alone, then frames.
	preface := make([]byte, len(h2Preface))
	_, err := io.ReadFull(server, preface)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(preface)).To(Equal(h2Preface))
	rest := make([]byte, len(frames))
	_, err = io.ReadFull(server, rest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(rest)).To(Equal(frames), "buffered reads lose and reorder nothing")

	var want bytes.Buffer
	for i := range 2000 {
		p := []byte(strings.Repeat(string(rune('a'+i%26)), 1+i%300))
		want.Write(p)
		n, err := server.Write(p)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(len(p)))
	}
	g.Expect(server.Close()).To(Succeed())
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want.Bytes()))

	_, err = server.Write([]byte("late"))
	g.Expect(err).To(MatchError(net.ErrClosed))
}

// TestH2ConnDropsAPeerThatReadsNothing: a client that takes no bytes
// holds at most the pending bound; once the write timeout passes without
// progress, writes fail and the connection is closed, so the server's
// reader ends too.
func TestH2ConnDropsAPeerThatReadsNothing(t *testing.T) {
	g := NewWithT(t)
	server, client := h2Pair(t, 200*time.Millisecond)
	_, err := client.Write([]byte(h2Preface))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = io.ReadFull(server, make([]byte, len(h2Preface)))
	g.Expect(err).NotTo(HaveOccurred())

	chunk := make([]byte, 64<<10)
	failed := make(chan error, 1)
	go func() {
		for {
			if _, err := server.Write(chunk); err != nil {
				failed <- err
				return
			}
		}
	}()
	g.Eventually(failed, 30*time.Second).Should(Receive(HaveOccurred()))
	_, err = server.Read(make([]byte, 1))
	g.Expect(err).To(HaveOccurred(), "the connection is closed")
}
