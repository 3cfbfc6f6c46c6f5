package main

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/proxy"
)

// heldApp is an application whose requests wait until released, counting
// how many it holds at once.
type heldApp struct {
	release     chan struct{}
	now, peak   atomic.Int64
	served      atomic.Int64
	releaseOnce sync.Once
}

func (a *heldApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.now.Add(1)
	defer a.now.Add(-1)
	a.served.Add(1)
	for {
		p := a.peak.Load()
		if n <= p || a.peak.CompareAndSwap(p, n) {
			break
		}
	}
	select {
	case <-a.release:
	case <-r.Context().Done():
	}
	_, _ = io.WriteString(w, "ok")
}

func (a *heldApp) let() { a.releaseOnce.Do(func() { close(a.release) }) }

// startProxy runs the enforcer's proxy server, with its default limits and
// a configuration of no policy, in front of app.
func startProxy(t *testing.T, app http.Handler) string {
	t.Helper()
	upstream := httptest.NewServer(app)
	t.Cleanup(upstream.Close)
	o, _, err := parseFlags([]string{"--upstream", upstream.URL, "--config", "unused.json"}, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(upstream.URL)
	e := &enforcer{o: o, log: slog.New(slog.DiscardHandler),
		handler: proxy.New(proxy.Options{Upstream: target, Limits: o.limits.requests})}
	cfg, err := config.Parse([]byte(`{"schema": "` + config.Schema + `", "namespace": "t", "policies": []}`))
	if err != nil {
		t.Fatal(err)
	}
	backends := engine.NewBackends("redis://127.0.0.1:1", env(nil), limiter.ClientOptions{})
	t.Cleanup(backends.Close)
	snap, err := engine.NewSnapshot(cfg, backends)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.handler.Swap(snap); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := e.proxyServer()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// h2Conn is a raw HTTP/2 client connection (prior knowledge), to send
// what no well-behaved client sends.
type h2Conn struct {
	nc  net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
}

func dialH2(t *testing.T, addr string) *h2Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	c := &h2Conn{nc: nc, fr: http2.NewFramer(nc, nc)}
	c.enc = hpack.NewEncoder(&c.buf)
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c
}

// open starts stream id, a GET / with no body.
func (c *h2Conn) open(id uint32) error {
	c.buf.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "app"}, {":path", "/"}} {
		_ = c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.buf.Bytes(), EndStream: true, EndHeaders: true})
}

// drain reads and discards the server's frames until the connection ends,
// reporting whether a GOAWAY came.
func (c *h2Conn) drain() (goAway chan bool) {
	goAway = make(chan bool, 1)
	go func() {
		saw := false
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				goAway <- saw
				return
			}
			if _, ok := f.(*http2.GoAwayFrame); ok {
				saw = true
			}
		}
	}()
	return goAway
}

// TestHTTP2StreamsAreBounded: a client opening far more streams than the
// server allows gets no more than --http2-max-concurrent-streams of them
// served at once; the enforcer does not grow with what it sends.
func TestHTTP2StreamsAreBounded(t *testing.T) {
	g := NewWithT(t)
	app := &heldApp{release: make(chan struct{})}
	addr := startProxy(t, app)
	defer app.let()
	before := goruntime.NumGoroutine()

	c := dialH2(t, addr)
	done := c.drain()
	const streams = 1000
	for i := range streams {
		if err := c.open(uint32(2*i + 1)); err != nil {
			break // the server closed the connection: also bounded
		}
	}
	g.Eventually(app.now.Load).Should(BeNumerically(">=", 200), "the allowed streams reach the application")
	g.Consistently(app.peak.Load).WithTimeout(300*time.Millisecond).Should(BeNumerically("<=", defaultHTTP2MaxStreams),
		"never more streams at once than the server allows")
	g.Expect(goruntime.NumGoroutine()-before).To(BeNumerically("<", 4*defaultHTTP2MaxStreams+100),
		"goroutines grow with the allowed streams, not with the streams sent")
	app.let()
	_ = c.nc.Close()
	<-done
}

// TestHTTP2RapidResetIsBounded: streams opened and cancelled at once (the
// rapid reset attack) cost the application at most the concurrent-stream
// limit at a time, and far fewer requests than were sent.
func TestHTTP2RapidResetIsBounded(t *testing.T) {
	g := NewWithT(t)
	app := &heldApp{release: make(chan struct{})}
	addr := startProxy(t, app)
	defer app.let()
	before := goruntime.NumGoroutine()

	c := dialH2(t, addr)
	done := c.drain()
	const streams = 100_000
	sent := 0
	for i := range streams {
		id := uint32(2*i + 1)
		if c.open(id) != nil || c.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			break // the server closed the connection
		}
		sent++
	}
	g.Expect(app.peak.Load()).To(BeNumerically("<=", defaultHTTP2MaxStreams))
	g.Expect(app.served.Load()).To(BeNumerically("<", streams/10), "cancelled streams are not forwarded")
	g.Expect(goruntime.NumGoroutine() - before).To(BeNumerically("<", 4*defaultHTTP2MaxStreams+100))
	t.Logf("sent %d of %d opened-and-reset streams; the application saw %d, at most %d at once", sent, streams, app.served.Load(), app.peak.Load())
	_ = c.nc.Close()
	<-done
}
