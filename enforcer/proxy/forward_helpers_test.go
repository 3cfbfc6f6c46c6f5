package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// forwardPaths are the two ways an admitted request reaches the
// application: the forwarder, and the reverse proxy (upgrades, and every
// request when the application is not a plain http:// address or a
// Transport is given). Behaviour that both have is tested through both.
var forwardPaths = []string{"forwarder", "reverse-proxy"}

// allowAll is a config whose one rule admits every request of a test.
func allowAll(t *testing.T) string {
	return policyJSON("api", "Enforce", "Open", "XRateLimit", ruleJSON("all", "{}", "TokenBucket", "1000000/1m"))
}

// serveWith is a Handler made with opts, deciding with allowAll, in front
// of the application at appURL, with the reverse proxy taking every request
// when path says so.
func serveWith(t *testing.T, path string, opts Options, appURL string) *fixture {
	t.Helper()
	opts.Upstream, _ = url.Parse(appURL)
	rec := &recording{checks: map[string]int{}, policies: map[string]int{}}
	opts.Recorder = rec
	h := New(opts)
	if path == "reverse-proxy" {
		h.forwarder = nil
	}
	t.Cleanup(h.CloseIdleConnections)
	backends := NewBackends(redisURL, func(string) (string, bool) { return "", false }, limiter.ClientOptions{})
	t.Cleanup(backends.Close)
	snap, err := NewSnapshot(configOf(t, allowAll(t)), backends)
	if err != nil {
		t.Fatal(err)
	}
	h.Swap(snap)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{url: srv.URL, rec: rec, handler: h, backends: backends}
}

// serveVia is serveWith in front of an httptest server running app.
func serveVia(t *testing.T, path string, app http.Handler) *fixture {
	srv := httptest.NewServer(app)
	t.Cleanup(srv.Close)
	return serveWith(t, path, Options{}, srv.URL)
}

// pathOnly serves requests by one forwarding path alone, without the
// handler's decision and canonicalisation: the request the test sends is
// the one the path is given, its forwarding headers included. The reverse
// proxy has a transport that keeps connections alive, as one given in
// Options would, so that it writes requests as the library does for any.
func pathOnly(t *testing.T, path string, opts Options, appURL string) string {
	t.Helper()
	opts.Upstream, _ = url.Parse(appURL)
	h := New(opts)
	t.Cleanup(h.CloseIdleConnections)
	var serve http.HandlerFunc
	if path == "forwarder" {
		serve = func(w http.ResponseWriter, r *http.Request) { h.forwarder.serve(w, r, h.upstreamError) }
	} else {
		tr := NewTransport()
		tr.ResponseHeaderTimeout = opts.ResponseHeaderTimeout
		t.Cleanup(tr.CloseIdleConnections)
		rp := &reverseProxy{proxy: NewUpstream(opts.Upstream, tr, h.upstreamError), maxBody: opts.MaxRequestBody,
			onError: h.upstreamError}
		serve = rp.ServeHTTP
	}
	srv := httptest.NewServer(serve)
	t.Cleanup(srv.Close)
	return srv.URL
}

// sentRequest is a request as an application read it off the wire.
type sentRequest struct {
	req     *http.Request // parsed from head; its Body is body
	head    string        // request line and header fields, as sent
	body    []byte
	trailer string // the trailer section of a chunked body, as sent
}

// rawApp is an application on a raw socket: answer is called for each
// request read on a connection and writes whatever it likes; the
// connection closes when answer returns false.
func rawApp(t *testing.T, answer func(conn net.Conn, sent *sentRequest) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Go(func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for {
					sent, err := readSent(br)
					if err != nil || !answer(conn, sent) {
						return
					}
				}
			})
		}
	})
	return "http://" + ln.Addr().String()
}

// readSent reads one request off br, keeping its bytes.
func readSent(br *bufio.Reader) (*sentRequest, error) {
	head, err := readLines(br)
	if err != nil {
		return nil, err
	}
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
	if err != nil {
		return nil, err
	}
	sent := &sentRequest{req: req, head: head}
	switch {
	case len(req.TransferEncoding) > 0:
		if sent.body, err = io.ReadAll(httputil.NewChunkedReader(br)); err != nil {
			return nil, err
		}
		if sent.trailer, err = readLines(br); err != nil {
			return nil, err
		}
	case req.ContentLength > 0:
		sent.body = make([]byte, req.ContentLength)
		if _, err := io.ReadFull(br, sent.body); err != nil {
			return nil, err
		}
	}
	req.Body = io.NopCloser(bytes.NewReader(sent.body))
	return sent, nil
}

// readLines reads lines up to and including a blank one.
func readLines(br *bufio.Reader) (string, error) {
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		head.WriteString(line)
		if line == "\r\n" || line == "\n" {
			return head.String(), nil
		}
	}
}
