package main

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluice-dev/sluice/enforcer/overload"
	"github.com/sluice-dev/sluice/enforcer/proxy"
	"github.com/sluice-dev/sluice/enforcer/transport"
)

// serverLimits bound what clients and the application can make the proxy
// hold: docs/enforcer.md, "Limits", lists them with their defaults.
type serverLimits struct {
	readHeaderTimeout     time.Duration
	idleTimeout           time.Duration
	maxHeaderBytes        int
	requests              transport.RequestLimits
	maxRequestBody        int64
	responseHeaderTimeout time.Duration
	// http2MaxStreams bounds the concurrent streams of one HTTP/2 client
	// connection.
	http2MaxStreams int
	// maxDelayed bounds the requests waiting at once for onLimit.delay
	// reservations.
	maxDelayed int
	// maxInFlight, maxInFlightPerTenant and maxConnections bound what the
	// whole enforcer holds; 0 derives them from GOMEMLIMIT (overload()).
	maxInFlight, maxInFlightPerTenant, maxConnections int
}

func addServerFlags(fs *pflag.FlagSet, l *serverLimits) {
	d := transport.DefaultRequestLimits
	fs.DurationVar(&l.readHeaderTimeout, "read-header-timeout", 10*time.Second, "time a client has to send a request's head")
	fs.DurationVar(&l.requests.BodyTimeout, "body-timeout", d.BodyTimeout, "time a client has to send a whole request body (0: no limit)")
	fs.DurationVar(&l.requests.BodyIdleTimeout, "body-idle-timeout", d.BodyIdleTimeout, "longest pause within a request body (0: no limit)")
	fs.DurationVar(&l.requests.WriteIdleTimeout, "write-idle-timeout", d.WriteIdleTimeout, "longest a client may leave a response unread (0: no limit)")
	fs.DurationVar(&l.idleTimeout, "idle-timeout", 2*time.Minute, "how long a client connection is kept open between requests")
	fs.IntVar(&l.maxHeaderBytes, "max-header-bytes", 64<<10, "largest request head (request line and header fields), in bytes; larger heads get 431")
	fs.Int64Var(&l.maxRequestBody, "max-request-body", 0, "largest request body, in bytes; larger bodies get 413 (0: no limit)")
	fs.DurationVar(&l.responseHeaderTimeout, "response-header-timeout", transport.DefaultResponseHeaderTimeout,
		"time the application has to start its response; then 504 (0: no limit)")
	fs.IntVar(&l.http2MaxStreams, "http2-max-concurrent-streams", defaultHTTP2MaxStreams,
		"concurrent requests (gRPC calls) one HTTP/2 client connection may have open; more wait for one to end")
	fs.IntVar(&l.maxDelayed, "delay-max-queued", proxy.DefaultMaxDelayed,
		"requests that may wait at once for capacity booked by onLimit.delay rules; more are decided without their delay")
	fs.IntVar(&l.maxInFlight, "max-in-flight", 0,
		"requests the enforcer holds at once; more get 503 with Retry-After (gRPC: UNAVAILABLE). 0: from GOMEMLIMIT, or 4096 without one")
	fs.IntVar(&l.maxInFlightPerTenant, "max-in-flight-per-tenant", 0,
		"requests one tenant may have in flight at once; more get 503. 0: a quarter of --max-in-flight")
	fs.IntVar(&l.maxConnections, "max-connections", 0,
		"client connections open at once; more wait in the listen queue. 0: from GOMEMLIMIT, or 4096 without one")
}

// overload is the bounds the flags and the soft memory limit set.
func (l *serverLimits) overload(memoryLimit int64) overload.Limits {
	o := overload.LimitsFor(memoryLimit)
	if l.maxInFlight > 0 {
		o.MaxInFlight = l.maxInFlight
		o.MaxInFlightPerTenant = max(o.MaxInFlight/4, 1)
	}
	if l.maxInFlightPerTenant > 0 {
		o.MaxInFlightPerTenant = l.maxInFlightPerTenant
	}
	if l.maxConnections > 0 {
		o.MaxConnections = l.maxConnections
	}
	return o
}

// defaultHTTP2MaxStreams is Go's own default, and what grpc-go clients
// expect of a server.
const defaultHTTP2MaxStreams = 250

// HTTP/2 flow control: what one client connection, and one of its
// streams, may have sent that the enforcer has not read yet.
const (
	http2ConnWindow   = 1 << 20
	http2StreamWindow = 1 << 20
)

// http2 is the HTTP/2 side of the proxy server. Header list size is
// --max-header-bytes, as for HTTP/1.1; Go's server answers rapid resets
// (streams opened and cancelled at once) by counting them against
// MaxConcurrentStreams and closing a connection that keeps doing it.
func (l *serverLimits) http2() *http.HTTP2Config {
	return &http.HTTP2Config{
		MaxConcurrentStreams:          l.http2MaxStreams,
		MaxReceiveBufferPerConnection: http2ConnWindow,
		MaxReceiveBufferPerStream:     http2StreamWindow,
		// A client that stops reading cannot hold a write for ever; the
		// same bound as --write-idle-timeout, or Go's default without.
		WriteByteTimeout: l.requests.WriteIdleTimeout,
		// A connection idle this long is pinged; one that does not
		// answer is closed, its streams with it.
		SendPingTimeout: 30 * time.Second,
		PingTimeout:     15 * time.Second,
	}
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
	case l.http2MaxStreams < 1:
		return fmt.Errorf("--http2-max-concurrent-streams must be at least 1, got %d", l.http2MaxStreams)
	case l.maxRequestBody < 0:
		return fmt.Errorf("--max-request-body must not be negative, got %d", l.maxRequestBody)
	case l.maxDelayed < 1:
		return fmt.Errorf("--delay-max-queued must be at least 1, got %d", l.maxDelayed)
	case l.maxInFlight < 0 || l.maxInFlightPerTenant < 0 || l.maxConnections < 0:
		return errors.New("--max-in-flight, --max-in-flight-per-tenant and --max-connections must not be negative (0 derives them from GOMEMLIMIT)")
	}
	return nil
}
