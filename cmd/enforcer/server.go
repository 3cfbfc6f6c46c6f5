package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluice-dev/sluice/enforcer/proxy"
)

// serverLimits bound what clients and the application can make the proxy
// hold: docs/enforcer.md, "Limits", lists them with their defaults.
type serverLimits struct {
	readHeaderTimeout     time.Duration
	idleTimeout           time.Duration
	maxHeaderBytes        int
	requests              proxy.RequestLimits
	maxRequestBody        int64
	responseHeaderTimeout time.Duration
}

func addServerFlags(fs *pflag.FlagSet, l *serverLimits) {
	d := proxy.DefaultRequestLimits
	fs.DurationVar(&l.readHeaderTimeout, "read-header-timeout", 10*time.Second, "time a client has to send a request's head")
	fs.DurationVar(&l.requests.BodyTimeout, "body-timeout", d.BodyTimeout, "time a client has to send a whole request body (0: no limit)")
	fs.DurationVar(&l.requests.BodyIdleTimeout, "body-idle-timeout", d.BodyIdleTimeout, "longest pause within a request body (0: no limit)")
	fs.DurationVar(&l.requests.WriteIdleTimeout, "write-idle-timeout", d.WriteIdleTimeout, "longest a client may leave a response unread (0: no limit)")
	fs.DurationVar(&l.idleTimeout, "idle-timeout", 2*time.Minute, "how long a client connection is kept open between requests")
	fs.IntVar(&l.maxHeaderBytes, "max-header-bytes", 64<<10, "largest request head (request line and header fields), in bytes; larger heads get 431")
	fs.Int64Var(&l.maxRequestBody, "max-request-body", 0, "largest request body, in bytes; larger bodies get 413 (0: no limit)")
	fs.DurationVar(&l.responseHeaderTimeout, "response-header-timeout", proxy.DefaultResponseHeaderTimeout,
		"time the application has to start its response; then 504 (0: no limit)")
}

func (l *serverLimits) validate() error {
	for name, d := range map[string]time.Duration{
		"--read-header-timeout": l.readHeaderTimeout, "--body-timeout": l.requests.BodyTimeout,
		"--body-idle-timeout": l.requests.BodyIdleTimeout, "--write-idle-timeout": l.requests.WriteIdleTimeout,
		"--idle-timeout": l.idleTimeout, "--response-header-timeout": l.responseHeaderTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("%s must not be negative, got %s", name, d)
		}
	}
	switch {
	case l.readHeaderTimeout == 0:
		return errors.New("--read-header-timeout must be positive: without it a client can hold a connection for ever")
	case l.maxHeaderBytes < 4<<10:
		return fmt.Errorf("--max-header-bytes must be at least 4096, got %d", l.maxHeaderBytes)
	case l.maxRequestBody < 0:
		return fmt.Errorf("--max-request-body must not be negative, got %d", l.maxRequestBody)
	}
	return nil
}
