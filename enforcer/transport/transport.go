// Package transport carries admitted requests to the application and its
// answers back, byte for byte: plain HTTP/1.1 requests on the deciding
// goroutine over one pool of kept-alive connections (forward.go),
// upgrades and the requests the forwarder does not take through
// httputil.ReverseProxy (upstream.go), gRPC calls to cleartext HTTP/2
// servers by the transport itself (grpc_call.go),
// HTTP/2 write coalescing (h2conn.go), and the time and size limits a
// client is held to while its request is forwarded (limits.go). It knows
// nothing of rules or limits: the proxy decides, then hands the request
// over.
package transport

import (
	"io"
	"log"
	"net/http"
	"net/url"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/request"
)

// Options configure an Upstream.
type Options struct {
	// Target is the application's base URL, e.g. http://127.0.0.1:8080.
	Target *url.URL
	// Transport reaches the application; nil means NewHTTP1() for the
	// requests that need a reverse proxy, NewH2C() for H2C, and the
	// forwarder for plain ones. A Transport given here takes them all.
	Transport http.RoundTripper
	// ErrorLog receives the reverse proxy's own errors; nil discards them.
	ErrorLog *log.Logger
	// Limits bound request bodies and slow clients while a request is
	// forwarded; the zero value sets no limit.
	Limits RequestLimits
	// ResponseHeaderTimeout bounds the wait for the application's final
	// response head once a request is sent; 0 is no limit. A Transport
	// given here keeps its own.
	ResponseHeaderTimeout time.Duration
	// MaxRequestBody is the largest request body forwarded, in bytes; 0 is
	// no limit.
	MaxRequestBody int64
	// OnError answers a request that could not be forwarded: its body
	// could not be read (a *RequestBodyError, ErrBodyTimeout), was over
	// MaxRequestBody (*http.MaxBytesError), or the application could not
	// be reached or gave no usable answer. It must answer.
	OnError func(http.ResponseWriter, *http.Request, error)
}

// Upstream is the application behind the enforcer and the ways to reach
// it. It is safe for concurrent use.
type Upstream struct {
	forwarder *forwarder   // plain requests; nil when a Transport was given
	upstream  http.Handler // the others: upgrades, streamed or large bodies
	transport http.RoundTripper
	// h2c forwards as cleartext HTTP/2; h2cCalls forwards gRPC calls
	// (grpcForwarder), which no response header timeout bounds: a server
	// stream may send its first message (and with it its headers)
	// whenever it has one, and the call's deadline bounds it.
	h2c, h2cCalls http.Handler
	h2cTransports []*http.Transport // nil when a Transport was given
	limits        RequestLimits
	onError       func(http.ResponseWriter, *http.Request, error)
}

// New is the Upstream opts describe.
func New(opts Options) *Upstream {
	u := &Upstream{limits: opts.Limits, onError: opts.OnError}
	h2cTransport, h2cCallTransport := opts.Transport, opts.Transport
	if opts.Transport == nil {
		plain, calls := NewH2C(), NewH2C()
		plain.ResponseHeaderTimeout = max(opts.ResponseHeaderTimeout, 0)
		u.h2cTransports = []*http.Transport{plain, calls}
		h2cTransport, h2cCallTransport = plain, calls
		u.forwarder = newForwarder(opts.Target, opts.ResponseHeaderTimeout, opts.MaxRequestBody)
		t := NewHTTP1()
		t.ResponseHeaderTimeout = max(opts.ResponseHeaderTimeout, 0)
		// One pool of connections, the forwarder's: the reverse proxy
		// carries upgrades, whose connections are never reused. Nor does it
		// pool for an application the forwarder cannot reach (https, a
		// path): the transport can hand a response the application sent
		// unasked to the next request (TestBrokenApplicationNeverDesyncs).
		t.DisableKeepAlives = true
		opts.Transport = t
	}
	u.transport = opts.Transport
	if opts.ErrorLog == nil {
		opts.ErrorLog = log.New(io.Discard, "", 0)
	}
	u.upstream = u.through(opts, opts.Transport)
	u.h2c = u.through(opts, h2cTransport)
	u.h2cCalls = &grpcForwarder{target: opts.Target, transport: h2cCallTransport, maxBody: opts.MaxRequestBody,
		onError: u.onError, errorLog: opts.ErrorLog}
	return u
}

// through is a reverse proxy to the application through t.
func (u *Upstream) through(opts Options, t http.RoundTripper) http.Handler {
	rp := newReverseProxy(opts.Target, t, u.onError)
	rp.ErrorLog = opts.ErrorLog
	return &reverseProxy{proxy: rp, maxBody: opts.MaxRequestBody, onError: u.onError}
}

// Forward passes an admitted request to the application, within the
// request limits, in protocol: cleartext HTTP/2 for H2C, except upgrades
// (WebSocket), which HTTP/2 cannot carry and which go as HTTP/1.1 to the
// same port.
func (u *Upstream) Forward(w http.ResponseWriter, r *http.Request, protocol config.UpstreamProtocol) {
	w, g := u.limits.Guard(w, r)
	defer g.Done()
	release, err := BufferBody(r)
	if err != nil {
		u.onError(w, r, &RequestBodyError{err})
		return
	}
	defer release()
	if protocol == config.UpstreamH2C && r.Header["Upgrade"] == nil {
		if request.IsGRPCStream(r) {
			u.h2cCalls.ServeHTTP(w, r)
		} else {
			u.h2c.ServeHTTP(w, r)
		}
		return
	}
	if u.forwarder != nil && u.forwarder.takes(r) {
		u.forwarder.serve(w, r, u.onError)
		return
	}
	u.upstream.ServeHTTP(w, r)
}

// CloseIdleConnections closes the kept-alive connections to the
// application that no request is using; call it after the server has shut
// down.
func (u *Upstream) CloseIdleConnections() {
	if u.forwarder != nil {
		u.forwarder.closeIdle()
	}
	if t, ok := u.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	for _, t := range u.h2cTransports {
		t.CloseIdleConnections()
	}
}
