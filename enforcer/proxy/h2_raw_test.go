package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/transport"
)

// rawHeadApp is an HTTP/1.1 application that records the head of each
// request it receives, as bytes, and answers 200.
func rawHeadApp(t *testing.T) (addr string, heads chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	heads = make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					var head bytes.Buffer
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						head.WriteString(line)
						if line == "\r\n" {
							break
						}
					}
					heads <- head.String()
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()
	return ln.Addr().String(), heads
}

// h2Request sends one HTTP/2 request with the given header fields, in
// order (pseudo-fields first), on a new prior-knowledge connection, and
// returns the response's :status.
func h2Request(t *testing.T, addr string, fields [][2]string) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_, _ = io.WriteString(nc, http2.ClientPreface)
	_ = fr.WriteSettings()
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, f := range fields {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: buf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no response: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			return f.PseudoValue("status")
		case *http2.RSTStreamFrame:
			return "reset " + f.ErrCode.String()
		case *http2.GoAwayFrame:
			return "goaway " + f.ErrCode.String()
		}
	}
}

// TestHTTP2FieldsTheApplicationReads: HTTP/2 lets a request carry fields
// HTTP/1.1 frames otherwise (a Host next to :authority, cookies split in
// several fields). Forwarded to an HTTP/1.1 application, each must say
// what the limiter decided on, once.
func TestHTTP2FieldsTheApplicationReads(t *testing.T) {
	appAddr, heads := rawHeadApp(t)
	target, _ := url.Parse("http://" + appAddr)
	h := New(Options{Upstream: target})
	backends := engine.NewBackends(redisURL, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
	t.Cleanup(backends.Close)
	snap, err := engine.NewSnapshot(configOf(t, policyJSON("api", "Enforce", "Open", "Both",
		ruleJSON("other-host", `{"hosts": ["exempt.example.com"]}`, "FixedWindow", "1000/1m"))), backends)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Swap(snap); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	base := [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}}

	t.Run("Host differing from :authority is refused", func(t *testing.T) {
		g := NewWithT(t)
		status := h2Request(t, addr, append(base[:3:3], [2]string{":authority", "app.example.com"}, [2]string{"host", "exempt.example.com"}))
		// The application would read either Host; the rules matched one.
		g.Expect(status).To(Equal("400"))
		g.Consistently(heads).WithTimeout(100 * time.Millisecond).ShouldNot(Receive())
	})
	t.Run("Host equal to :authority is sent once", func(t *testing.T) {
		g := NewWithT(t)
		status := h2Request(t, addr, append(base[:3:3], [2]string{":authority", "app.example.com"}, [2]string{"host", "APP.example.com"}))
		g.Expect(status).To(Equal("200"))
		var head string
		g.Eventually(heads).Should(Receive(&head))
		g.Expect(strings.Count(strings.ToLower(head), "\r\nhost:")).To(Equal(1), head)
		g.Expect(head).To(ContainSubstring("\r\nHost: app.example.com\r\n"))
	})
	t.Run("cookies split in fields reach HTTP/1.1 as one Cookie", func(t *testing.T) {
		g := NewWithT(t)
		status := h2Request(t, addr, append(base[:3:3], [2]string{":authority", "app.example.com"}, [2]string{"cookie", "a=1"}, [2]string{"cookie", "b=2"}))
		g.Expect(status).To(Equal("200"))
		var head string
		g.Eventually(heads).Should(Receive(&head))
		g.Expect(strings.Count(head, "\r\nCookie:")).To(Equal(1), head)
		g.Expect(head).To(ContainSubstring("\r\nCookie: a=1; b=2\r\n"))
	})
}

// TestHTTP2StalledStreamIsReset: an HTTP/2 client that grants a response
// no flow-control window holds its stream no longer than the write-idle
// timeout; the stream is reset, and its connection, which the client
// still reads, lives on.
func TestHTTP2StalledStreamIsReset(t *testing.T) {
	g := NewWithT(t)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("x"), 256<<10))
	}))
	t.Cleanup(app.Close)
	target, _ := url.Parse(app.URL)
	h := New(Options{Upstream: target, Limits: transport.RequestLimits{WriteIdleTimeout: 300 * time.Millisecond}})
	backends := engine.NewBackends(redisURL, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
	t.Cleanup(backends.Close)
	snap, err := engine.NewSnapshot(configOf(t, policyJSON("api", "Enforce", "Open", "Both",
		ruleJSON("all", "{}", "TokenBucket", "1000/1m"))), backends)
	g.Expect(err).NotTo(HaveOccurred())
	if err := h.Swap(snap); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = transport.H2Listener(srv.Listener, time.Minute)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)

	nc, err := net.Dial("tcp", srv.Listener.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_, _ = io.WriteString(nc, http2.ClientPreface)
	g.Expect(fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1024})).To(Succeed())
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/big"}, {":authority", "app.example.com"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	g.Expect(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})).To(Succeed())

	received, pinged := 0, false
	for {
		f, err := fr.ReadFrame()
		g.Expect(err).NotTo(HaveOccurred(), "the stream was never reset")
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.DataFrame:
			received += len(f.Data())
		case *http2.RSTStreamFrame:
			g.Expect(f.StreamID).To(Equal(uint32(1)))
			g.Expect(received).To(BeNumerically("<=", 1024), "only the window was sent")
			g.Expect(fr.WritePing(false, [8]byte{1})).To(Succeed())
			pinged = true
		case *http2.PingFrame:
			if pinged && f.IsAck() {
				return // the connection lives on
			}
		case *http2.GoAwayFrame:
			t.Fatalf("the connection was closed: %v", f.ErrCode)
		}
	}
}
