//go:build linux || darwin || freebsd || netbsd || openbsd

package transport

import (
	"errors"
	"net"
	"syscall"
)

// connCheck peeks at a connection's socket without blocking. Its parts are
// made once per connection, so that a check before every reuse allocates
// nothing.
type connCheck struct {
	raw  syscall.RawConn // nil when the connection has no socket
	peek func(fd uintptr) bool
	buf  [1]byte
	err  error
}

func (k *connCheck) init(conn net.Conn) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	k.raw = raw
	k.peek = func(fd uintptr) bool {
		_, _, k.err = syscall.Recvfrom(int(fd), k.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}
}

// alive reports whether the application has neither closed c nor sent
// anything on it while it was idle: a peek at the socket that does not
// block.
func alive(c *upstreamConn) bool {
	if c.hasBuffered() {
		return false
	}
	k := &c.check
	if k.raw == nil {
		return true
	}
	if err := k.raw.Read(k.peek); err != nil {
		return false
	}
	// Nothing to read (EAGAIN) is the only state of a healthy idle
	// connection; a close reads 0 bytes, a reset an error, and anything
	// else is a response nobody asked for.
	return errors.Is(k.err, syscall.EAGAIN) || errors.Is(k.err, syscall.EWOULDBLOCK)
}
