package transport

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// upstreamConn is one kept-alive connection to the application. Its
// buffers are taken from pools only while they are used: bw while the
// request is written, br from the response's first bytes until its end. A
// request waiting for a slow application, and an idle connection, hold
// neither (32 KiB between them), only the head reader's small read-ahead.
type upstreamConn struct {
	conn     net.Conn
	head     headReader    // what br reads from
	br       *bufio.Reader // nil but from the response's first byte to its end
	bw       *bufio.Writer // nil but while the request is written
	lastUsed time.Time
	check    connCheck // looks for unsolicited bytes before reuse
	// interrupt cuts the exchange in progress off: its client went away.
	// Made once per connection, so that watching a request's context costs
	// no closure.
	interrupt func()

	// mu orders the changes to the connection's deadlines: the wait for
	// the response head, the end of a streamed body and an interruption
	// come from different goroutines, and an interruption must stick.
	mu sync.Mutex
	// aborted is why the exchange in progress was cut off, nil if it was not.
	aborted error
	// awaitingHead: the final response head has not arrived yet.
	awaitingHead bool
	// headTimed: the read deadline is the response header timeout's.
	headTimed bool

	// sending: a goroutine is writing the request body; sent gets its
	// outcome.
	sending bool
	sent    chan error
}

var aLongTimeAgo = time.Unix(1, 0)

func newUpstreamConn(conn net.Conn) *upstreamConn {
	c := &upstreamConn{
		conn: conn,
		head: headReader{conn: conn, budget: -1},
	}
	c.check.init(conn)
	c.interrupt = func() { c.abort(errClientGone) }
	return c
}

// upstreamBufferSize is the size of a connection's read and write buffers.
const upstreamBufferSize = 16 << 10

var (
	upstreamWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, upstreamBufferSize) }}
	upstreamReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, upstreamBufferSize) }}
)

// takeWriter gives c a write buffer for the request it sends.
func (c *upstreamConn) takeWriter() *bufio.Writer {
	if c.bw == nil {
		c.bw = upstreamWriters.Get().(*bufio.Writer)
		c.bw.Reset(c.conn)
	}
	return c.bw
}

// putWriter gives c's write buffer back once the request is sent (or
// failed: the connection is closed then, and what the buffer held is
// dropped).
func (c *upstreamConn) putWriter() {
	if c.bw != nil {
		c.bw.Reset(nil)
		upstreamWriters.Put(c.bw)
		c.bw = nil
	}
}

// awaitResponse waits for the application's first bytes of a response
// without a read buffer, then gives c its read buffer. The first read
// takes up to readAhead bytes: a small response, head and body, in one
// system call.
func (c *upstreamConn) awaitResponse() error {
	if c.br == nil {
		n, err := c.head.Read(c.head.ahead[:])
		if n == 0 {
			if err == nil {
				err = io.ErrNoProgress
			}
			return err
		}
		c.head.aheadPos, c.head.aheadEnd = 0, n
		c.br = upstreamReaders.Get().(*bufio.Reader)
		c.br.Reset(&c.head)
	}
	_, err := c.br.Peek(1)
	return err
}

// putReader gives c's read buffer back once a response is read to its
// end; bytes beyond it keep the buffer, and the connection is not reused.
func (c *upstreamConn) putReader() bool {
	if c.br == nil {
		return true
	}
	if c.br.Buffered() > 0 {
		return false
	}
	c.br.Reset(nil)
	upstreamReaders.Put(c.br)
	c.br = nil
	return true
}

// hasBuffered reports whether c holds bytes the application sent that no
// response has read.
func (c *upstreamConn) hasBuffered() bool {
	return c.head.aheadPos < c.head.aheadEnd || (c.br != nil && c.br.Buffered() > 0)
}

// begin starts an exchange on c.
func (c *upstreamConn) begin() {
	c.mu.Lock()
	c.aborted, c.awaitingHead, c.headTimed = nil, true, false
	c.mu.Unlock()
}

// abort cuts the exchange off for good: reads and writes fail from now on.
func (c *upstreamConn) abort(cause error) {
	c.mu.Lock()
	if c.aborted == nil {
		c.aborted = cause
		_ = c.conn.SetDeadline(aLongTimeAgo)
	}
	c.mu.Unlock()
}

// startHeadTimer starts the response header timeout, once the request is
// all sent (as http.Transport counts it), unless the head came first.
func (c *upstreamConn) startHeadTimer(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	if c.awaitingHead && c.aborted == nil {
		_ = c.conn.SetReadDeadline(time.Now().Add(d))
		c.headTimed = true
	}
	c.mu.Unlock()
}

// gotHead stops the response header timeout: the body may take as long as
// the application likes.
func (c *upstreamConn) gotHead() {
	c.mu.Lock()
	c.awaitingHead = false
	if c.headTimed && c.aborted == nil {
		_ = c.conn.SetReadDeadline(time.Time{})
	}
	c.headTimed = false
	c.mu.Unlock()
}

// failure is the reason an exchange failed with err: what cut it off, if
// anything did, or the response header timeout.
func (c *upstreamConn) failure(err error) error {
	c.mu.Lock()
	cause, timed := c.aborted, c.headTimed
	c.mu.Unlock()
	switch {
	case cause != nil && !errors.Is(cause, errClientGone):
		return cause
	case cause == nil && timed && errors.Is(err, os.ErrDeadlineExceeded):
		return errResponseHeaderTimeout
	}
	return err
}

// sendBody writes the request body on a goroutine of its own, so that the
// application can answer while it arrives. A failure to read the client's
// body aborts the exchange; the response header timeout starts once the
// body is sent.
func (c *upstreamConn) sendBody(w http.ResponseWriter, body io.Reader, length int64, trailer http.Header, headerTimeout time.Duration) {
	if c.sent == nil {
		c.sent = make(chan error, 1)
	}
	c.sending = true
	// Without it the server reads away the rest of the body as soon as
	// the response starts, racing the goroutine below.
	_ = http.NewResponseController(w).EnableFullDuplex()
	go func() {
		err := writeBody(c.bw, body, length, trailer, true)
		if err == nil {
			c.putWriter()
		}
		if errors.As(err, new(*RequestBodyError)) {
			c.abort(err)
		} else if err == nil {
			c.startHeadTimer(headerTimeout)
		}
		c.sent <- err
	}()
}

// finishBody waits for the body writer, if any, and returns nil when the
// whole request was sent, else what stopped it: a *RequestBodyError when
// the client's body broke off. A writer still busy once the response is
// over (the application answered without reading everything) is stopped:
// the connection is closed and the client's upload cut off.
func (c *upstreamConn) finishBody(w http.ResponseWriter) error {
	if !c.sending {
		return nil
	}
	c.sending = false
	select {
	case err := <-c.sent:
		return err
	default:
	}
	_ = c.conn.Close()                                            // unblocks a write to the application
	_ = http.NewResponseController(w).SetReadDeadline(time.Now()) // and a read of the client's body
	// The writer now fails, with the interruption just caused or with
	// what stopped it at the same moment.
	if err := <-c.sent; err != nil {
		return err
	}
	return errBodyInterrupted
}

// errBodyInterrupted: the body writer was stopped before it was done.
var errBodyInterrupted = errors.New("request body interrupted")

// brokenBody reports whether err, a body writer's failure, is the client's
// body breaking off or breaking its framing, rather than an interruption
// the forwarder caused (a closed connection, an expired read deadline).
func brokenBody(err error) bool {
	return errors.As(err, new(*RequestBodyError)) &&
		!errors.Is(err, ErrBodyTimeout) && !errors.Is(err, os.ErrDeadlineExceeded)
}

var errResponseHeadTooLarge = errors.New("response head too large")

// readAhead is the most a connection reads of a response before it has a
// read buffer: most small responses whole, yet little for an idle
// connection to hold.
const readAhead = 512

// headReader reads from a connection, and fails once a response head has
// used up its budget of bytes.
type headReader struct {
	conn   net.Conn
	budget int64 // what is left; negative while reading a body: no limit
	// ahead[aheadPos:aheadEnd] was read ahead (awaitResponse), counted in
	// budget, and not read from h yet.
	ahead              [readAhead]byte
	aheadPos, aheadEnd int
}

func (h *headReader) Read(b []byte) (int, error) {
	if h.aheadPos < h.aheadEnd && len(b) > 0 {
		n := copy(b, h.ahead[h.aheadPos:h.aheadEnd])
		h.aheadPos += n
		return n, nil
	}
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

// get takes the most recently used idle connection, or nil. Every
// connection is checked before reuse: one the application closed would
// fail the request, and one it wrote to while idle is out of step, its
// next "response" the rest of an earlier one.
func (f *forwarder) get() (c *upstreamConn, reused bool) {
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
		if time.Since(c.lastUsed) < f.idleTimeout && alive(c) {
			return c, true
		}
		_ = c.conn.Close()
	}
}

// put returns c to the pool, or closes it when the pool is full or closed.
func (f *forwarder) put(c *upstreamConn) {
	if !c.putReader() { // bytes beyond the response: out of step
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
