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
	"errors"
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
}

// ForwardError is a request that could not be forwarded: its body could
// not be read (a *RequestBodyError, ErrBodyTimeout), was over
// MaxRequestBody (*http.MaxBytesError), or the application could not be
// reached or gave no usable answer. Nothing of an answer was written: the
// caller answers.
type ForwardError struct {
	Err error
	// bodyTimedOut: the request's body had missed its deadline, whatever
	// Err says; cancelled: the request's context had ended.
	bodyTimedOut, cancelled bool
}

func (e *ForwardError) Error() string { return e.Err.Error() }
func (e *ForwardError) Unwrap() error { return e.Err }

// newForwardError is the ForwardError of r, which failed with err.
func newForwardError(r *http.Request, err error) *ForwardError {
	return &ForwardError{Err: err, bodyTimedOut: BodyTimedOut(r, err), cancelled: r.Context().Err() != nil}
}

// Cancelled reports whether err is a ForwardError of a request whose
// context had ended when it failed (its client gone, or its connection
// failing otherwise).
func Cancelled(err error) bool {
	var fe *ForwardError
	return errors.As(err, &fe) && fe.cancelled
}

// path is one way to the application: it forwards a request and returns
// a *ForwardError when it wrote nothing and the caller must answer.
type path interface {
	forward(w http.ResponseWriter, r *http.Request) error
}

// Upstream is the application behind the enforcer and the ways to reach
// it. It is safe for concurrent use.
type Upstream struct {
	forwarder *forwarder // plain requests; nil when a Transport was given
	upstream  path       // the others: upgrades, streamed or large bodies
	transport http.RoundTripper
	// h2c forwards as cleartext HTTP/2; h2cCalls forwards gRPC calls
	// (grpcForwarder), which no response header timeout bounds: a server
	// stream may send its first message (and with it its headers)
	// whenever it has one, and the call's deadline bounds it.
	h2c, h2cCalls path
	h2cTransports []*http.Transport // nil when a Transport was given
	limits        RequestLimits
}

// New is the Upstream opts describe.
func New(opts Options) *Upstream {
	u := &Upstream{limits: opts.Limits}
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
		errorLog: opts.ErrorLog}
	return u
}

// through is a reverse proxy to the application through t.
func (u *Upstream) through(opts Options, t http.RoundTripper) path {
	rp := newReverseProxy(opts.Target, t)
	rp.ErrorLog = opts.ErrorLog
	return &reverseProxy{proxy: rp, maxBody: opts.MaxRequestBody}
}

// Forward passes an admitted request to the application, within the
// request limits, in protocol: cleartext HTTP/2 for H2C, except upgrades
// (WebSocket), which HTTP/2 cannot carry and which go as HTTP/1.1 to the
// same port. head, when not nil, names the answer's fields that are not
// the client's and learns of an upgrade. It returns a *ForwardError when
// the request could not be forwarded or the application gave no usable
// answer: nothing was written then, and the caller answers.
func (u *Upstream) Forward(w http.ResponseWriter, r *http.Request, protocol config.UpstreamProtocol, head *AnswerHead) error {
	if head != nil {
		w = &privateFields{ResponseWriter: w, head: head}
	}
	w, g := u.limits.Guard(w, r)
	defer g.Done()
	release, err := BufferBody(r)
	if err != nil {
		return newForwardError(r, &RequestBodyError{err})
	}
	defer release()
	if protocol == config.UpstreamH2C && r.Header["Upgrade"] == nil {
		if request.IsGRPCStream(r) {
			return u.h2cCalls.forward(w, r)
		}
		return u.h2c.forward(w, r)
	}
	if u.forwarder != nil && u.forwarder.takes(r) {
		return u.forwarder.forward(w, r)
	}
	return u.upstream.forward(w, r)
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
