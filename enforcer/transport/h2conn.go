package transport

import (
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// Go's HTTP/2 server and client flush after every frame: a unary gRPC call
// through the enforcer cost it nine write system calls (response HEADERS,
// DATA and trailers, request HEADERS, DATA and its end, two PING
// acknowledgements, Redis), each also waking the process at the other end,
// and its server read each frame with two read calls, one for the 9-byte
// header and one for the payload (docs/design/0002-http2-write-coalescing.md). An h2Conn takes
// those writes off the caller: a flush copies the bytes into a pending
// buffer and one writer goroutine per burst sends whatever has
// accumulated by the time it runs, so frames written in quick succession
// (a call's response, several streams' frames) go out in one system call,
// in order. Nothing waits for more to come: the writer starts at once, so
// a lone frame goes out as soon as a CPU is free. Reads are buffered. A
// connection that is not HTTP/2 is left as it is.

const (
	// h2ReadBuffer is the read buffer of a server connection: the frames
	// of a few unary calls at once, and little held by an idle one.
	h2ReadBuffer = 4 << 10
	// h2MaxPending bounds what a connection holds that its peer has not
	// taken yet; a write beyond it waits, as a socket write would.
	h2MaxPending = 256 << 10
	// h2CloseGrace bounds how long a closed connection's last writes (a
	// GOAWAY) may take.
	h2CloseGrace = 5 * time.Second
	// h2KeptBuffer bounds the write buffers a connection keeps between
	// bursts: an idle connection holds at most 1.5 times this and the
	// read buffer.
	h2KeptBuffer = 8 << 10
)

// h2Preface is what a client sends first on a cleartext HTTP/2 connection
// with prior knowledge.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

var errH2ConnClosed = net.ErrClosed

// h2Conn is a net.Conn whose writes, once it carries HTTP/2, are
// coalesced by a writer goroutine, and whose reads are buffered.
type h2Conn struct {
	net.Conn
	// writeTimeout bounds each system call of the writer: a peer that
	// takes no bytes for that long has the connection closed. 0 is no
	// limit.
	writeTimeout time.Duration

	// Reads run on one goroutine at a time (net.Conn's callers do not
	// read concurrently): no lock.
	sniffed  int  // bytes of the preface seen so far; -1: not HTTP/2
	bufReads bool // reads go through rbuf
	rbuf     []byte
	rpos     int
	rend     int

	mu      sync.Mutex
	cond    sync.Cond // signalled when pending shrinks, or on an error
	h2      bool      // writes are coalesced
	pending []byte    // written, not sent yet
	spare   []byte    // the writer's buffer, reused
	writing bool      // a writer goroutine runs
	closing bool
	err     error // sticky: the first write error, or errH2ConnClosed
}

// newH2Conn wraps a server connection, which becomes HTTP/2 when its first
// bytes are the client preface.
func newH2Conn(c net.Conn, writeTimeout time.Duration) *h2Conn {
	hc := &h2Conn{Conn: c, writeTimeout: writeTimeout}
	hc.cond.L = &hc.mu
	return hc
}

// newH2ClientConn wraps a connection on which this side speaks HTTP/2 from
// the first byte. Its reader buffers already: reads pass through.
func newH2ClientConn(c net.Conn, writeTimeout time.Duration) *h2Conn {
	hc := newH2Conn(c, writeTimeout)
	hc.sniffed = -1
	hc.h2 = true
	return hc
}

func (c *h2Conn) Read(p []byte) (int, error) {
	if c.bufReads {
		return c.readBuffered(p)
	}
	n, err := c.Conn.Read(p)
	if c.sniffed >= 0 && n > 0 {
		c.sniff(p[:n])
	}
	return n, err
}

// sniff follows the first bytes read: the whole client preface makes the
// connection HTTP/2, anything else leaves it alone. Buffering the reads
// from then on is safe whatever the caller holds already: the buffer only
// ever holds bytes read after those.
func (c *h2Conn) sniff(p []byte) {
	for _, b := range p {
		if b != h2Preface[c.sniffed] {
			c.sniffed = -1
			return
		}
		if c.sniffed++; c.sniffed == len(h2Preface) {
			c.sniffed = -1
			c.bufReads = true
			c.rbuf = make([]byte, h2ReadBuffer)
			c.mu.Lock()
			c.h2 = true
			c.mu.Unlock()
			return
		}
	}
}

func (c *h2Conn) readBuffered(p []byte) (int, error) {
	if c.rpos == c.rend {
		if len(p) >= len(c.rbuf) {
			return c.Conn.Read(p)
		}
		n, err := c.Conn.Read(c.rbuf)
		c.rpos, c.rend = 0, n
		if n == 0 {
			return 0, err
		}
	}
	n := copy(p, c.rbuf[c.rpos:c.rend])
	c.rpos += n
	return n, nil
}

func (c *h2Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if !c.h2 {
		c.mu.Unlock()
		return c.Conn.Write(p)
	}
	for c.err == nil && len(c.pending) > 0 && len(c.pending)+len(p) > h2MaxPending {
		c.cond.Wait()
	}
	if c.err != nil || c.closing {
		err := c.err
		if err == nil {
			err = errH2ConnClosed
		}
		c.mu.Unlock()
		return 0, err
	}
	c.pending = append(c.pending, p...)
	if !c.writing {
		c.writing = true
		go c.writeLoop()
	}
	c.mu.Unlock()
	return len(p), nil
}

// writeLoop sends what is pending until nothing is, then ends.
func (c *h2Conn) writeLoop() {
	c.mu.Lock()
	for len(c.pending) > 0 && c.err == nil {
		buf := c.pending
		c.pending = c.spare[:0]
		c.mu.Unlock()
		err := c.send(buf)
		c.mu.Lock()
		c.spare = nil // it is pending's now
		if cap(buf) <= h2KeptBuffer {
			c.spare = buf[:0]
		}
		if err != nil && c.err == nil {
			c.err = err
		}
		c.cond.Broadcast()
	}
	c.writing = false
	// Between bursts an idle connection keeps little.
	if cap(c.spare) > h2KeptBuffer/2 {
		c.spare = nil
	}
	if cap(c.pending) > h2KeptBuffer {
		c.pending = nil
	}
	if c.err != nil {
		// A peer that takes nothing must not keep the connection: its
		// reader learns of it as it would of a failed write.
		_ = c.Conn.Close()
	} else if c.closing {
		c.err = errH2ConnClosed
		_ = c.Conn.Close()
	}
	c.cond.Broadcast()
	c.mu.Unlock()
}

// send writes p whole, failing when writeTimeout (h2CloseGrace once
// closing) passes with no byte taken, as http2's WriteByteTimeout does.
func (c *h2Conn) send(p []byte) error {
	for {
		c.mu.Lock()
		timeout := c.writeTimeout
		if c.closing {
			timeout = h2CloseGrace
		}
		c.mu.Unlock()
		deadline := time.Time{}
		if timeout > 0 {
			deadline = time.Now().Add(timeout)
		}
		_ = c.Conn.SetWriteDeadline(deadline)
		n, err := c.Conn.Write(p)
		p = p[n:]
		if err == nil || n == 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
	}
}

// Close sends what is pending, within h2CloseGrace, and closes. Reads
// blocked on the connection return at once.
func (c *h2Conn) Close() error {
	c.mu.Lock()
	if c.closing || (c.err != nil && !c.writing) {
		c.closing = true
		c.mu.Unlock()
		return c.Conn.Close()
	}
	c.closing = true
	if !c.writing || !c.h2 {
		c.err = errH2ConnClosed
		c.cond.Broadcast()
		c.mu.Unlock()
		return c.Conn.Close()
	}
	// The writer closes once it is done.
	c.mu.Unlock()
	_ = c.Conn.SetReadDeadline(time.Now())
	_ = c.Conn.SetWriteDeadline(time.Now().Add(h2CloseGrace))
	return nil
}

// SetDeadline, SetWriteDeadline: once the connection is HTTP/2 its writes
// are the writer's, bounded by writeTimeout; a caller's write deadline
// then bounds nothing the caller waits for.
func (c *h2Conn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *h2Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	h2 := c.h2
	c.mu.Unlock()
	if h2 {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// CloseWrite is net/http's graceful close of an HTTP/1.1 connection.
func (c *h2Conn) CloseWrite() error {
	c.mu.Lock()
	for c.writing {
		c.cond.Wait()
	}
	c.mu.Unlock()
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("proxy: connection cannot close for writing only")
}

// H2Listener wraps l's connections so that those carrying cleartext HTTP/2
// have their writes coalesced and their reads buffered (h2Conn);
// writeTimeout bounds how long a client may take no bytes at all before
// its connection is closed (0: no limit), as http.HTTP2Config's
// WriteByteTimeout does.
func H2Listener(l net.Listener, writeTimeout time.Duration) net.Listener {
	return &h2Listener{Listener: l, writeTimeout: writeTimeout}
}

type h2Listener struct {
	net.Listener
	writeTimeout time.Duration
}

func (l *h2Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newH2Conn(c, l.writeTimeout), nil
}
