package transport

import (
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/enforcer/request"
)

// RequestLimits bound what one client can make the enforcer, and the
// application connection it holds, wait for. Zero values mean no limit.
type RequestLimits struct {
	// BodyTimeout bounds the time to receive a whole request body, so that
	// a body trickled in a byte at a time cannot hold a connection to the
	// application for ever.
	BodyTimeout time.Duration
	// BodyIdleTimeout bounds the wait for each next part of a body.
	BodyIdleTimeout time.Duration
	// WriteIdleTimeout bounds the wait for a client to take each next part
	// of a response (a client that stops reading).
	WriteIdleTimeout time.Duration
}

// DefaultRequestLimits are the limits of sluice-enforcer's flags.
var DefaultRequestLimits = RequestLimits{
	BodyTimeout:      2 * time.Minute,
	BodyIdleTimeout:  15 * time.Second,
	WriteIdleTimeout: time.Minute,
}

// bufferedBodyMax is the largest body read whole before a connection to
// the application is taken, so that a slow client never holds one while
// it sends an ordinary request.
const bufferedBodyMax = 64 << 10

// ErrBodyTimeout is a request body that did not arrive in time.
var ErrBodyTimeout = errors.New("the request body did not arrive in time")

// BodyTimedOut reports whether r's body missed its deadline, whatever
// error the exchange ended with.
func BodyTimedOut(r *http.Request, err error) bool {
	if fe := (*ForwardError)(nil); errors.As(err, &fe) && fe.bodyTimedOut {
		return true
	}
	b, ok := r.Body.(*deadlineBody)
	return errors.Is(err, ErrBodyTimeout) || (ok && b.timedOut)
}

// Guard applies the time limits to an admitted request about to be
// forwarded: its body reads and its response writes get deadlines. The
// guard's Done clears the write deadline, so that the next response on the
// connection starts afresh. An ordinary HTTP/1.1 request costs one
// allocation here: the writer, which holds the response controller the
// body and done share.
// Upgrades are left alone: the connection becomes the application's.
func (l *RequestLimits) Guard(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, Guarded) {
	if r.Header["Upgrade"] != nil {
		return w, Guarded{}
	}
	var rc *http.ResponseController
	out := w
	var g Guarded
	switch {
	case l.WriteIdleTimeout > 0 && r.ProtoMajor >= 2:
		sw := &streamWriteTimer{ResponseWriter: w, rc: http.NewResponseController(w), idle: l.WriteIdleTimeout}
		rc, out, g.stream = sw.rc, sw, sw
	case l.WriteIdleTimeout > 0:
		dw := &deadlineWriter{ResponseWriter: w, rc: *http.NewResponseController(w), idle: l.WriteIdleTimeout}
		rc, out, g.clear = &dw.rc, dw, &dw.rc
	}
	_, buffered := r.Body.(*bufferedBody)
	hasBody := r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 && !buffered
	// A gRPC call's request body is its stream of messages, which may
	// pause as long as the call lasts: the call's deadline bounds it, and
	// HTTP/2 bounds how many one connection holds.
	if hasBody && !request.IsGRPCStream(r) && (l.BodyTimeout > 0 || l.BodyIdleTimeout > 0) {
		if rc == nil {
			rc = http.NewResponseController(w)
		}
		b := &deadlineBody{body: r.Body, rc: rc, idle: l.BodyIdleTimeout}
		if l.BodyTimeout > 0 {
			b.end = time.Now().Add(l.BodyTimeout)
		}
		r.Body = b
	}
	// The read deadline stays: a body read whole has cleared it, and one
	// that was not must not be drained by the server for longer than the
	// client was allowed to send it. The server sets its own for the next
	// request.
	return out, g
}

// Guarded is what Guard leaves to undo once the response is written.
type Guarded struct {
	clear  *http.ResponseController // its write deadline is cleared
	stream *streamWriteTimer        // its timer is stopped
}

// Done undoes what Guard set for the response written.
func (g Guarded) Done() {
	if g.clear != nil {
		_ = g.clear.SetWriteDeadline(time.Time{})
	}
	if g.stream != nil {
		g.stream.stop()
	}
}

// deadlineBody sets the connection's read deadline before each read of a
// request body: the sooner of the idle timeout and the body's end.
type deadlineBody struct {
	body io.ReadCloser
	rc   *http.ResponseController
	end  time.Time
	idle time.Duration
	done bool
	// timedOut is set once the body missed its deadline: net/http then
	// cancels the request's context, so the error reaching the forwarder
	// may no longer say why.
	timedOut bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.done {
		return b.body.Read(p)
	}
	deadline := b.end
	if b.idle > 0 {
		if d := time.Now().Add(b.idle); deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
	}
	_ = b.rc.SetReadDeadline(deadline)
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		// The server reads on after the body to notice a client hanging
		// up; an expired deadline there would cancel the request.
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.timedOut = true
		err = ErrBodyTimeout
	}
	return n, err
}

func (b *deadlineBody) Close() error { return b.body.Close() }

// deadlineWriter sets the connection's write deadline before each write of
// a response.
type deadlineWriter struct {
	http.ResponseWriter
	rc   http.ResponseController
	idle time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController (the reverse proxy's flushes and
// hijacks) reach the server's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// streamWriteTimer bounds each write of an HTTP/2 response, where a
// client can stall one stream (by granting it no flow-control window)
// while its connection stays busy. An HTTP/2 stream's write deadline
// resets the stream when it passes, write or not, and each setting is a
// message to the connection's goroutine (four per write and flush, the
// largest share of a unary call's hand-offs): instead a timer of the
// writer's own, armed during each write, sets a deadline in the past,
// which resets the stream at once, when a write has waited idle. A quiet
// stream lives on.
type streamWriteTimer struct {
	http.ResponseWriter
	rc      *http.ResponseController
	idle    time.Duration
	timer   *time.Timer
	writing atomic.Bool
}

func (w *streamWriteTimer) arm() {
	w.writing.Store(true)
	if w.timer == nil {
		w.timer = time.AfterFunc(w.idle, w.expire)
		return
	}
	w.timer.Reset(w.idle)
}

func (w *streamWriteTimer) disarm() {
	w.writing.Store(false)
	w.timer.Stop()
}

// expire resets the stream of a write still waiting; a write that has
// returned is left alone.
func (w *streamWriteTimer) expire() {
	if w.writing.Load() {
		_ = w.rc.SetWriteDeadline(time.Now().Add(-time.Second))
	}
}

func (w *streamWriteTimer) Write(p []byte) (int, error) {
	w.arm()
	defer w.disarm()
	return w.ResponseWriter.Write(p)
}

func (w *streamWriteTimer) Flush() {
	w.arm()
	defer w.disarm()
	_ = w.rc.Flush()
}

func (w *streamWriteTimer) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *streamWriteTimer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// bufferedBody is a request body read whole before forwarding.
type bufferedBody struct {
	buf []byte
	off int
}

var bufferedBodies = sync.Pool{New: func() any { return &bufferedBody{buf: make([]byte, 0, 4<<10)} }}

// BufferBody reads r's body whole when it is short enough, so that the
// forwarder sends it at once; release returns the buffer after the
// exchange.
func BufferBody(r *http.Request) (release func(), err error) {
	if _, done := r.Body.(*bufferedBody); done || r.ContentLength <= 0 || r.ContentLength > bufferedBodyMax {
		return func() {}, nil
	}
	b := bufferedBodies.Get().(*bufferedBody)
	b.buf = slices.Grow(b.buf[:0], int(r.ContentLength))[:r.ContentLength]
	b.off = 0
	if _, err := io.ReadFull(r.Body, b.buf); err != nil {
		bufferedBodies.Put(b)
		return nil, err
	}
	_ = r.Body.Close()
	r.Body = b
	return func() {
		b.buf = b.buf[:0]
		bufferedBodies.Put(b)
	}, nil
}

func (b *bufferedBody) Read(p []byte) (int, error) {
	if b.off >= len(b.buf) {
		return 0, io.EOF
	}
	n := copy(p, b.buf[b.off:])
	b.off += n
	return n, nil
}

func (b *bufferedBody) Close() error { return nil }

// Bytes are the whole body, for request.Canonicalize to read a form.
func (b *bufferedBody) Bytes() []byte { return b.buf }

// IsShortForm reports whether r is a POST of a URL-encoded form short
// enough to be read before deciding.
func IsShortForm(r *http.Request) bool {
	if r.Method != http.MethodPost || r.ContentLength <= 0 || r.ContentLength > bufferedBodyMax {
		return false
	}
	ct := r.Header["Content-Type"]
	return len(ct) == 1 && len(ct[0]) >= len(formType) && strings.EqualFold(ct[0][:len(formType)], formType)
}

const formType = "application/x-www-form-urlencoded"
