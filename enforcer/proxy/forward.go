package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Forwarding an ordinary request is most of the enforcer's work, so it
// does not go through httputil.ReverseProxy and http.Transport: their
// per-connection reader and writer goroutines cost two goroutine hand-offs
// per request, and cloning the request and its headers made most of the
// allocations (docs/performance.md). A forwarder writes the request to a
// kept-alive connection to the application and reads the answer on the
// handler's own goroutine instead. Requests it does not take (upgrades,
// bodies of unknown or large size, TE) go through the reverse proxy, which
// streams a request body while reading the response.

const (
	// maxForwardBody is the largest request body the forwarder sends. It
	// writes the whole request before reading the answer, so a body must
	// fit in the socket buffers in case the application answers early
	// (413, 401) without reading it.
	maxForwardBody = 64 << 10
	// idleCheckAfter is how long a pooled connection may be idle before it
	// is checked for a close by the application before use.
	idleCheckAfter = time.Second
	// maxInformational bounds the 1xx answers skipped before a final one.
	maxInformational = 8
	// maxResponseHead bounds the response heads (status lines and header
	// fields, 1xx included) read for one request, as the server bounds
	// request heads.
	maxResponseHead = 1 << 20
)

// forwarder sends plain HTTP/1.1 requests to one application over a pool of
// kept-alive connections. It is safe for concurrent use.
type forwarder struct {
	addr   string // host:port of the application
	host   string // Host header for a request that had none
	dialer net.Dialer

	maxIdle     int
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   []*upstreamConn // most recently used last
	pruner *time.Timer
}

// upstreamConn is one kept-alive connection to the application.
type upstreamConn struct {
	conn     net.Conn
	head     headReader // what br reads from
	br       *bufio.Reader
	bw       *bufio.Writer
	lastUsed time.Time
	// interrupt unblocks the connection's reads and writes for good.
	interrupt func()
}

// newForwarder is the forwarder to target, or nil when target is not a
// plain http:// URL without a path or query (those go through the reverse
// proxy, which joins paths).
func newForwarder(target *url.URL) *forwarder {
	if target == nil || target.Scheme != "http" || target.Host == "" || target.User != nil ||
		(target.Path != "" && target.Path != "/") || target.RawQuery != "" {
		return nil
	}
	addr := target.Host
	if target.Port() == "" {
		addr = net.JoinHostPort(target.Hostname(), "80")
	}
	return &forwarder{
		addr:        addr,
		host:        target.Host,
		dialer:      net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second},
		maxIdle:     1024,
		idleTimeout: 90 * time.Second,
	}
}

// takes reports whether the forwarder handles r; the reverse proxy takes
// the others.
func (f *forwarder) takes(r *http.Request) bool {
	if r.ProtoMajor != 1 || r.ContentLength < 0 || r.ContentLength > maxForwardBody ||
		len(r.RequestURI) == 0 || r.RequestURI[0] != '/' {
		return false
	}
	h := r.Header
	return h["Upgrade"] == nil && h["Te"] == nil && h["Trailer"] == nil
}

// errUpstreamResponse is a response the forwarder cannot pass on.
var errUpstreamResponse = errors.New("unexpected response from the application")

// serve forwards r and copies the response to w; onError answers when the
// application could not be reached or gave no usable response.
func (f *forwarder) serve(w http.ResponseWriter, r *http.Request, onError func(http.ResponseWriter, *http.Request, error)) {
	ctx := r.Context()
	resp, conn, stop, err := f.roundTrip(ctx, r)
	if err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		onError(w, r, err)
		return
	}
	reusable, broken := copyResponse(w, resp)
	if !stop() {
		reusable = false // the deadline may have been set
	}
	if reusable {
		f.put(conn)
	} else {
		_ = conn.conn.Close()
	}
	if broken {
		// The application broke off the body: abort the client's response
		// too, so that it is not taken as complete.
		panic(http.ErrAbortHandler)
	}
}

// roundTrip writes r to a pooled connection, or a new one, and reads the
// response head. A pooled connection the application closed before
// answering is replaced once if r can be sent again. Until stop is called,
// a client that hangs up interrupts the exchange (as the reverse proxy
// would cancel its request), so that a long poll is not left running;
// stop reports false if it did.
func (f *forwarder) roundTrip(ctx context.Context, r *http.Request) (resp *http.Response, c *upstreamConn, stop func() bool, err error) {
	replayable := r.ContentLength == 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead ||
		r.Method == http.MethodOptions || r.Method == http.MethodTrace)
	for attempt := 0; ; attempt++ {
		c, reused := f.get(!replayable)
		if c == nil {
			conn, err := f.dialer.DialContext(ctx, "tcp", f.addr)
			if err != nil {
				return nil, nil, nil, err
			}
			c = newUpstreamConn(conn)
		}
		stop := context.AfterFunc(ctx, c.interrupt)
		resp, received, err := f.exchange(c, r)
		if err == nil {
			return resp, c, stop, nil
		}
		stop()
		_ = c.conn.Close()
		if !reused || received || !replayable || attempt > 0 || ctx.Err() != nil {
			return nil, nil, nil, err
		}
	}
}

// exchange sends r on c and reads the final response's head; received
// reports whether any of the response had arrived when it failed.
func (f *forwarder) exchange(c *upstreamConn, r *http.Request) (resp *http.Response, received bool, err error) {
	if err := f.writeRequest(c.bw, r); err != nil {
		return nil, false, err
	}
	c.head.budget = maxResponseHead
	defer func() { c.head.budget = -1 }() // the body is not limited
	if _, err := c.br.Peek(1); err != nil {
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
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, true, fmt.Errorf("%w: 101 Switching Protocols to a request that asked for no upgrade", errUpstreamResponse)
		case resp.StatusCode >= 200:
			return resp, true, nil
		}
		// 100 Continue (never asked for) or 103 Early Hints: skipped.
	}
	return nil, true, fmt.Errorf("%w: more than %d informational responses", errUpstreamResponse, maxInformational)
}

// writeRequest writes r as the reverse proxy would send it: same method,
// target, Host and headers, without hop-by-hop headers, with this hop in
// X-Forwarded-For and X-Forwarded-Host and -Proto set unless the client
// (an ingress) set them.
func (f *forwarder) writeRequest(bw *bufio.Writer, r *http.Request) error {
	host := r.Host
	if host == "" {
		host = f.host
	}
	_, _ = bw.WriteString(r.Method)
	_ = bw.WriteByte(' ')
	_, _ = bw.WriteString(r.RequestURI)
	_, _ = bw.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = bw.WriteString(host)
	_, _ = bw.WriteString("\r\n")

	connection := r.Header["Connection"]
	for k, vv := range r.Header {
		// Content-Length is written below from the body's length; the
		// client's own header would be a duplicate. Expect: 100-continue is
		// answered here (the server sends 100 Continue when the body is
		// read), as nginx does, since the body is read before sending.
		if isHopByHop(k) || k == "X-Forwarded-For" || k == "Content-Length" || k == "Expect" || (connection != nil && listedIn(connection, k)) {
			continue
		}
		for _, v := range vv {
			writeField(bw, k, v)
		}
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		_, _ = bw.WriteString("X-Forwarded-For: ")
		for _, v := range r.Header["X-Forwarded-For"] {
			_, _ = bw.WriteString(v)
			_, _ = bw.WriteString(", ")
		}
		_, _ = bw.WriteString(ip)
		_, _ = bw.WriteString("\r\n")
	}
	if r.Header["X-Forwarded-Host"] == nil && r.Host != "" {
		writeField(bw, "X-Forwarded-Host", r.Host)
	}
	if r.Header["X-Forwarded-Proto"] == nil {
		proto := "http"
		if r.TLS != nil {
			proto = "https"
		}
		writeField(bw, "X-Forwarded-Proto", proto)
	}
	if r.ContentLength > 0 || r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		_, _ = bw.WriteString("Content-Length: ")
		_, _ = bw.Write(strconv.AppendInt(bw.AvailableBuffer(), r.ContentLength, 10))
		_, _ = bw.WriteString("\r\n")
	}
	_, _ = bw.WriteString("\r\n")
	if r.ContentLength > 0 {
		n, err := io.Copy(bw, r.Body)
		if err != nil {
			return fmt.Errorf("reading the request body: %w", err)
		}
		if n != r.ContentLength {
			return fmt.Errorf("reading the request body: %d of %d bytes", n, r.ContentLength)
		}
	}
	return bw.Flush()
}

func writeField(bw *bufio.Writer, k, v string) {
	_, _ = bw.WriteString(k)
	_, _ = bw.WriteString(": ")
	_, _ = bw.WriteString(v)
	_, _ = bw.WriteString("\r\n")
}

// copyResponse writes resp to w, streaming its body, and reports whether
// its connection can carry another request, or broke off the body.
func copyResponse(w http.ResponseWriter, resp *http.Response) (reusable, broken bool) {
	hdr := w.Header()
	connection := resp.Header["Connection"]
	for k, vv := range resp.Header {
		if isHopByHop(k) || (connection != nil && listedIn(connection, k)) {
			continue
		}
		if have, ok := hdr[k]; ok {
			hdr[k] = append(have, vv...)
		} else {
			hdr[k] = vv
		}
	}
	announced := len(resp.Trailer)
	if announced > 0 {
		names := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			names = append(names, k)
		}
		hdr["Trailer"] = []string{strings.Join(names, ", ")}
	}
	w.WriteHeader(resp.StatusCode)

	// Like the reverse proxy, flush each read of a body of unknown length
	// or an event stream, so that streamed responses are not held back.
	var flusher http.Flusher
	if resp.ContentLength < 0 || isEventStream(resp.Header["Content-Type"]) {
		flusher, _ = w.(http.Flusher)
		if flusher != nil {
			flusher.Flush()
		}
	}
	buf := copyBuffers.Get()
	defer copyBuffers.Put(buf)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return false, false // the client went away
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return false, true
		}
	}
	// Trailers the application sent without announcing them go out with
	// the prefix the server takes for undeclared trailers.
	prefix := ""
	if len(resp.Trailer) != announced {
		prefix = http.TrailerPrefix
	}
	for k, vv := range resp.Trailer {
		hdr[prefix+k] = vv
	}
	_ = resp.Body.Close()
	return !resp.Close, false
}

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(ct []string) bool {
	if len(ct) == 0 {
		return false
	}
	v := ct[0]
	if i := strings.IndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	return strings.EqualFold(strings.TrimSpace(v), "text/event-stream")
}

// isHopByHop reports whether the canonical header k concerns one
// connection only (RFC 9110, section 7.6.1).
func isHopByHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// listedIn reports whether the Connection header values name k.
func listedIn(connection []string, k string) bool {
	for _, v := range connection {
		for v != "" {
			var token string
			token, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(textproto.TrimString(token), k) {
				return true
			}
		}
	}
	return false
}

func newUpstreamConn(conn net.Conn) *upstreamConn {
	c := &upstreamConn{
		conn:      conn,
		head:      headReader{conn: conn, budget: -1},
		bw:        bufio.NewWriterSize(conn, 16<<10),
		interrupt: func() { _ = conn.SetDeadline(time.Unix(1, 0)) },
	}
	c.br = bufio.NewReaderSize(&c.head, 16<<10)
	return c
}

var errResponseHeadTooLarge = errors.New("response head too large")

// headReader reads from a connection, and fails once a response head has
// used up its budget of bytes.
type headReader struct {
	conn   net.Conn
	budget int64 // what is left; negative while reading a body: no limit
}

func (h *headReader) Read(b []byte) (int, error) {
	switch {
	case h.budget < 0:
		return h.conn.Read(b)
	case h.budget == 0:
		return 0, errResponseHeadTooLarge
	case int64(len(b)) > h.budget:
		b = b[:h.budget]
	}
	n, err := h.conn.Read(b)
	h.budget -= int64(n)
	return n, err
}

// get takes the most recently used idle connection, or nil. check asks for
// a connection that is known not to have been closed by the application
// (the request cannot be sent twice); a connection idle for a while is
// checked in any case.
func (f *forwarder) get(check bool) (c *upstreamConn, reused bool) {
	for {
		f.mu.Lock()
		n := len(f.idle)
		if n == 0 {
			f.mu.Unlock()
			return nil, false
		}
		c = f.idle[n-1]
		f.idle[n-1] = nil
		f.idle = f.idle[:n-1]
		f.mu.Unlock()
		if idle := time.Since(c.lastUsed); idle < f.idleTimeout && (!(check || idle > idleCheckAfter) || alive(c)) {
			return c, true
		}
		_ = c.conn.Close()
	}
}

// put returns c to the pool, or closes it when the pool is full or closed.
func (f *forwarder) put(c *upstreamConn) {
	if c.br.Buffered() > 0 { // bytes beyond the response: out of step
		_ = c.conn.Close()
		return
	}
	c.lastUsed = time.Now()
	f.mu.Lock()
	if len(f.idle) >= f.maxIdle {
		f.mu.Unlock()
		_ = c.conn.Close()
		return
	}
	f.idle = append(f.idle, c)
	if f.pruner == nil {
		f.pruner = time.AfterFunc(f.idleTimeout, f.prune)
	}
	f.mu.Unlock()
}

// prune closes the connections idle for longer than the idle timeout; it
// runs while any connection is idle.
func (f *forwarder) prune() {
	now := time.Now()
	f.mu.Lock()
	expired := 0
	for expired < len(f.idle) && now.Sub(f.idle[expired].lastUsed) >= f.idleTimeout {
		expired++
	}
	stale := append([]*upstreamConn(nil), f.idle[:expired]...)
	f.idle = append(f.idle[:0], f.idle[expired:]...)
	clear(f.idle[len(f.idle):cap(f.idle)])
	if len(f.idle) > 0 {
		f.pruner.Reset(f.idleTimeout - now.Sub(f.idle[0].lastUsed))
	} else {
		f.pruner = nil
	}
	f.mu.Unlock()
	for _, c := range stale {
		_ = c.conn.Close()
	}
}

// closeIdle closes the idle connections.
func (f *forwarder) closeIdle() {
	f.mu.Lock()
	idle := f.idle
	f.idle = nil
	f.mu.Unlock()
	for _, c := range idle {
		_ = c.conn.Close()
	}
}
