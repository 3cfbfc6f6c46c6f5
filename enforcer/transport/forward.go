package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Forwarding a request is most of the enforcer's work, so it does not go
// through httputil.ReverseProxy and http.Transport: their per-connection
// reader and writer goroutines cost two goroutine hand-offs per request,
// and cloning the request and its headers made most of the allocations
// (docs/design/0001-http1-forwarder.md). A forwarder writes the request to a kept-alive
// connection to the application and reads the answer on the handler's own
// goroutine; a body of unknown or large size is sent by a goroutine of its
// own meanwhile, as http.Transport does. Only upgrades go through the
// reverse proxy, which hijacks the client's connection.
//
// The forwarder holds itself to http.Transport's safety: a pooled
// connection is checked for unsolicited bytes before every reuse, so that
// an application answering twice can never hand one client's response to
// another (forward_pool.go).

const (
	// maxForwardBody is the largest request body written from the
	// handler's goroutine before the answer is read. Such a body fits in
	// the socket buffers if the application answers early (413, 401)
	// without reading it; a larger one is streamed.
	maxForwardBody = 64 << 10
	// maxInformational bounds the 1xx answers taken before a final one.
	maxInformational = 8
	// maxResponseHead bounds the response heads (status lines and header
	// fields, 1xx included) read for one request, as the server bounds
	// request heads.
	maxResponseHead = 1 << 20
)

// DefaultResponseHeaderTimeout is the suggested Options.ResponseHeaderTimeout.
// It is generous: an application that answers a long poll with headers late
// is within its rights; the limit is there so that a hung application frees
// its connection and its client gets a 504 rather than waiting for ever.
const DefaultResponseHeaderTimeout = 60 * time.Second

// forwarder sends HTTP/1.1 requests to one application over a pool of
// kept-alive connections. It is safe for concurrent use.
type forwarder struct {
	addr   string // host:port of the application
	host   string // Host header for a request that had none
	dialer net.Dialer

	// headerTimeout bounds the wait for the final response head once the
	// request is sent; 0 is no limit.
	headerTimeout time.Duration
	// maxBody is the largest request body forwarded; 0 is no limit.
	maxBody int64

	maxIdle     int
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   []*upstreamConn // most recently used last
	pruner *time.Timer
}

// newForwarder is the forwarder to target, or nil when target is not a
// plain http:// URL without a path or query (those go through the reverse
// proxy, which joins paths).
func newForwarder(target *url.URL, headerTimeout time.Duration, maxBody int64) *forwarder {
	if target == nil || target.Scheme != "http" || target.Host == "" || target.User != nil ||
		(target.Path != "" && target.Path != "/") || target.RawQuery != "" {
		return nil
	}
	addr := target.Host
	if target.Port() == "" {
		addr = net.JoinHostPort(target.Hostname(), "80")
	}
	return &forwarder{
		addr:          addr,
		host:          target.Host,
		dialer:        net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second},
		headerTimeout: headerTimeout,
		maxBody:       maxBody,
		maxIdle:       1024,
		idleTimeout:   90 * time.Second,
	}
}

// takes reports whether the forwarder handles r: all but upgrades, which
// need the reverse proxy's hijacking, and targets that are not origin-form
// (CONNECT, OPTIONS *).
func (f *forwarder) takes(r *http.Request) bool {
	return r.Header["Upgrade"] == nil && r.Method != http.MethodConnect &&
		len(r.URL.Path) > 0 && r.URL.Path[0] == '/'
}

var (
	// errUpstreamResponse is a response the forwarder cannot pass on.
	errUpstreamResponse = errors.New("unexpected response from the application")
	// errResponseHeaderTimeout: the application sent no final response
	// head within the response header timeout.
	errResponseHeaderTimeout = errors.New("timeout awaiting the application's response headers")
	// errClientGone interrupts an exchange whose client went away.
	errClientGone = errors.New("client went away")
)

// RequestBodyError is a failure to read the client's request body: the
// request cannot be completed, whatever the application does.
type RequestBodyError struct{ err error }

func (e *RequestBodyError) Error() string { return "reading the request body: " + e.err.Error() }
func (e *RequestBodyError) Unwrap() error { return e.err }

// forward sends r and copies the response to w; it returns a
// *ForwardError, having written nothing, when the request could not be
// forwarded or the application gave no usable response.
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request) error {
	body, err := limitBody(w, r, f.maxBody)
	if err != nil {
		return newForwardError(r, err)
	}
	ctx := r.Context()
	resp, c, stop, err := f.roundTrip(ctx, w, r, body)
	if err != nil {
		// net/http cancels the context when the client's side fails, a
		// broken body included: that must be answered, not taken for a
		// client gone away.
		if ctx.Err() != nil && !errors.As(err, new(*RequestBodyError)) {
			err = context.Cause(ctx)
		}
		return newForwardError(r, err)
	}
	reusable, broken := copyResponse(w, resp)
	if c.finishBody(w) != nil {
		reusable = false // the application answered before it had the whole body
	}
	if !stop() {
		reusable = false // the deadline may have been set
	}
	if reusable {
		f.put(c)
	} else {
		_ = c.conn.Close()
	}
	if broken {
		// The application broke off the body: abort the client's response
		// too, so that it is not taken as complete.
		panic(http.ErrAbortHandler)
	}
	return nil
}

// roundTrip sends r to a pooled connection, or a new one, and reads the
// final response head. A pooled connection the application closed before
// answering is replaced once if r can be sent again. Until stop is called,
// a client that hangs up interrupts the exchange (as the reverse proxy
// would cancel its request), so that a long poll is not left running;
// stop reports false if it did.
func (f *forwarder) roundTrip(ctx context.Context, w http.ResponseWriter, r *http.Request, body io.Reader) (resp *http.Response, c *upstreamConn, stop func() bool, err error) {
	replayable := r.ContentLength == 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead ||
		r.Method == http.MethodOptions || r.Method == http.MethodTrace)
	for attempt := 0; ; attempt++ {
		c, reused := f.get()
		if c == nil {
			conn, err := f.dialer.DialContext(ctx, "tcp", f.addr)
			if err != nil {
				return nil, nil, nil, err
			}
			c = newUpstreamConn(conn)
		}
		stop := context.AfterFunc(ctx, c.interrupt)
		resp, received, err := f.exchange(c, w, r, body)
		if err == nil {
			return resp, c, stop, nil
		}
		if berr := c.finishBody(w); brokenBody(berr) {
			// The client's body broke, and its connection's failure may
			// have cut the exchange off first: the body is the reason.
			err = berr
		}
		stop()
		_ = c.conn.Close()
		if !reused || received || !replayable || attempt > 0 || ctx.Err() != nil ||
			errors.Is(err, errResponseHeaderTimeout) {
			return nil, nil, nil, err
		}
	}
}

// exchange sends r on c and reads the final response's head, relaying
// informational answers to w; received reports whether any of the response
// had arrived when it failed.
func (f *forwarder) exchange(c *upstreamConn, w http.ResponseWriter, r *http.Request, body io.Reader) (resp *http.Response, received bool, err error) {
	c.begin()
	streamed := r.ContentLength < 0 || r.ContentLength > maxForwardBody
	bw := c.takeWriter()
	if err := f.writeHead(bw, r); err != nil {
		return nil, false, err
	}
	switch {
	case r.ContentLength == 0:
	case streamed:
		if err := bw.Flush(); err != nil {
			return nil, false, err
		}
		c.sendBody(w, body, r.ContentLength, r.Trailer, f.headerTimeout)
	default:
		if err := writeBody(bw, body, r.ContentLength, nil, false); err != nil {
			return nil, false, err
		}
	}
	if !streamed {
		if err := bw.Flush(); err != nil {
			return nil, false, err
		}
		c.putWriter()
		c.startHeadTimer(f.headerTimeout)
	}
	resp, received, err = readHead(c, w, r)
	if err != nil {
		return nil, received, c.failure(err)
	}
	c.gotHead()
	return resp, true, nil
}

// readHead reads response heads up to the final one. 100 Continue is
// dropped (the enforcer answers Expect itself); other 1xx answers, such as
// 103 Early Hints, are relayed as they come.
func readHead(c *upstreamConn, w http.ResponseWriter, r *http.Request) (resp *http.Response, received bool, err error) {
	c.head.budget = maxResponseHead
	defer func() { c.head.budget = -1 }() // the body is not limited
	if err := c.awaitResponse(); err != nil {
		return nil, false, err
	}
	for range maxInformational {
		resp, err = http.ReadResponse(c.br, r)
		if err != nil {
			if errors.Is(err, errResponseHeadTooLarge) || c.head.budget == 0 {
				err = fmt.Errorf("%w: response head over %d bytes", errUpstreamResponse, maxResponseHead)
			}
			return nil, true, err
		}
		switch {
		case resp.StatusCode < 100:
			return nil, true, fmt.Errorf("%w: status %d", errUpstreamResponse, resp.StatusCode)
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, true, fmt.Errorf("%w: 101 Switching Protocols to a request that asked for no upgrade", errUpstreamResponse)
		case resp.StatusCode >= 200:
			return resp, true, nil
		case resp.StatusCode != http.StatusContinue:
			writeInformational(w, resp.StatusCode, resp.Header)
		}
	}
	return nil, true, fmt.Errorf("%w: more than %d informational responses", errUpstreamResponse, maxInformational)
}

// limitBody is r's body as it may be forwarded: refused with a
// *http.MaxBytesError when its declared length is over limit, cut off
// with one when a body of unknown length grows over it. 0 is no limit.
func limitBody(w http.ResponseWriter, r *http.Request, limit int64) (io.ReadCloser, error) {
	switch {
	case limit <= 0 || r.ContentLength == 0:
		return r.Body, nil
	case r.ContentLength > limit:
		return nil, &http.MaxBytesError{Limit: limit}
	case r.ContentLength < 0:
		return http.MaxBytesReader(w, r.Body, limit), nil
	}
	return r.Body, nil
}
