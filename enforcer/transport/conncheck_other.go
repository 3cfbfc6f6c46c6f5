//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package transport

import "net"

// connCheck has nothing to look at on this system.
type connCheck struct{}

func (*connCheck) init(net.Conn) {}

// alive cannot look at the socket on this system: a connection the
// application closed is found when a request fails on it, and bytes it
// sent while idle only if they had arrived with the response.
func alive(c *upstreamConn) bool { return !c.hasBuffered() }
