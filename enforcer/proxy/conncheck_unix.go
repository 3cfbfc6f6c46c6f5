//go:build linux || darwin || freebsd || netbsd || openbsd

package proxy

import (
	"errors"
	"syscall"
)

// alive reports whether the application has neither closed c nor sent
// anything on it while it was idle: a peek at the socket that does not
// block.
func alive(c *upstreamConn) bool {
	if c.br.Buffered() > 0 {
		return false
	}
	sc, ok := c.conn.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var b [1]byte
	var rerr error
	if err := raw.Read(func(fd uintptr) bool {
		_, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		return false
	}
	// Nothing to read (EAGAIN) is the only state of a healthy idle
	// connection; a close reads 0 bytes, a reset an error.
	return errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK)
}
