// Package listenhint names, when a program cannot bind one of its
// listeners, the flag or environment variable that moves it: the default
// ports (8080, 8081) are ones other programs on a host commonly hold.
package listenhint

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// Listener is one listener of a program: its address as configured, the
// flag that sets it and the environment variables that do, if any.
type Listener struct {
	Name, Addr, Flag string
	Env              []string
}

// Explain adds to err, a failure to listen, which of ls it is and how to
// move it. An error that is not one of ls failing to listen is returned
// as it is.
func Explain(err error, ls ...Listener) error {
	var op *net.OpError
	if err == nil || !errors.As(err, &op) || op.Op != "listen" || op.Addr == nil {
		return err
	}
	_, port, splitErr := net.SplitHostPort(op.Addr.String())
	if splitErr != nil {
		return err
	}
	for _, l := range ls {
		if _, p, e := net.SplitHostPort(l.Addr); e != nil || p != port {
			continue
		}
		how := "--" + l.Flag
		if len(l.Env) > 0 {
			how += " (or " + strings.Join(l.Env, ", ") + ")"
		}
		return fmt.Errorf("%w: the %s listener cannot bind %s; if another program holds the port, move it with %s", err, l.Name, l.Addr, how)
	}
	return err
}
