// Package proxy is the enforcer's request path: an http.Handler that runs
// each request through a list of stages (pipeline.go): it makes the
// request canonical (package request), decides it against its policies'
// rules in one round trip per Redis (engine.Batch), answers 429 (or 503
// when a fail-closed policy cannot decide) with rate limit headers and an
// RFC 9457 problem, and otherwise hands the canonical request to the
// application (package transport), adding the headers to its response
// and settling what the answer decides.
package proxy

import (
	"fmt"
	"log"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/overload"
	"github.com/sluice-dev/sluice/enforcer/transport"
)

// Handler decides and forwards requests. It is safe for concurrent use.
type Handler struct {
	live     atomic.Pointer[inService]
	upstream upstream
	// protocol is the upstream protocol when no policy names one.
	protocol config.UpstreamProtocol
	rec      engine.Recorder
	limits   transport.RequestLimits
	maxBody  int64
	// delays are the requests waiting for their reservations (delay.go).
	delays delayQueue
	// overload bounds the requests in flight; nil: no bound.
	overload *overload.Shedder
}

// upstream is where admitted requests go: a *transport.Upstream, or an
// in-process stand-in where a benchmark measures the decision alone.
type upstream interface {
	Forward(w http.ResponseWriter, r *http.Request, protocol config.UpstreamProtocol, head *transport.AnswerHead) error
	CloseIdleConnections()
}

// inService is the configuration in service and what the proxy alone
// derives from it.
type inService struct {
	*engine.Snapshot
	// protocol is how the policies forward to the application; empty when
	// no policy selects the pod (the Handler's default applies).
	protocol config.UpstreamProtocol
}

// Options configure a Handler.
type Options struct {
	// Upstream is the application's base URL, e.g. http://127.0.0.1:8080.
	Upstream *url.URL
	// Transport reaches the upstream; nil means transport.NewHTTP1() for
	// the requests that need a reverse proxy, and the enforcer's own
	// forwarder for plain ones. A Transport given here takes them all.
	Transport http.RoundTripper
	// Recorder is told every decision; nil records nothing.
	Recorder engine.Recorder
	// ErrorLog receives the reverse proxy's own errors (a client gone in
	// the middle of a body); nil discards them.
	ErrorLog *log.Logger
	// Limits bound request bodies and slow clients; the zero value sets no
	// limit (sluice-enforcer starts from transport.DefaultRequestLimits).
	Limits transport.RequestLimits
	// ResponseHeaderTimeout bounds the wait for the application's final
	// response head once a request is sent (a 504 when it expires); 0 is
	// no limit. transport.DefaultResponseHeaderTimeout is the suggested
	// value. A Transport given here keeps its own.
	ResponseHeaderTimeout time.Duration
	// UpstreamProtocol is how requests are forwarded while no policy of the
	// configuration in service selects the pod (its policies say
	// otherwise); empty means HTTP1. A Transport given here carries H2C
	// requests too.
	UpstreamProtocol config.UpstreamProtocol
	// MaxRequestBody is the largest request body forwarded, in bytes: a
	// larger declared length is answered 413 before anything reaches the
	// application, a chunked body growing over it is cut off (413 if the
	// application has not answered yet) with its connection. 0 is no limit.
	MaxRequestBody int64
	// MaxDelayed bounds the requests waiting at once for capacity booked
	// by delay rules (delay.go); 0 means DefaultMaxDelayed.
	MaxDelayed int
	// Overload bounds the requests in flight, in all and per tenant; nil
	// bounds nothing.
	Overload *overload.Shedder
}

// New is a Handler forwarding admitted requests as opts say. Serve no
// request before the first Swap.
func New(opts Options) *Handler {
	h := &Handler{rec: opts.Recorder, limits: opts.Limits, maxBody: opts.MaxRequestBody, protocol: opts.UpstreamProtocol.OrDefault(),
		overload: opts.Overload}
	if h.rec == nil {
		h.rec = engine.NopRecorder{}
	}
	h.delays.max = opts.MaxDelayed
	if h.delays.max <= 0 {
		h.delays.max = DefaultMaxDelayed
	}
	h.upstream = transport.New(transport.Options{Target: opts.Upstream, Transport: opts.Transport, ErrorLog: opts.ErrorLog,
		Limits: opts.Limits, ResponseHeaderTimeout: opts.ResponseHeaderTimeout, MaxRequestBody: opts.MaxRequestBody})
	return h
}

// CloseIdleConnections closes the kept-alive connections to the
// application that no request is using; call it after the server has shut
// down.
func (h *Handler) CloseIdleConnections() { h.upstream.CloseIdleConnections() }

// Swap puts s into service, carrying the adaptive state of the one in
// service over; requests already being decided finish with the snapshot
// they started with. A configuration whose policies forward with two
// protocols is refused, and the one in service stays.
func (h *Handler) Swap(s *engine.Snapshot) error {
	protocol, err := UpstreamProtocol(s.Config)
	if err != nil {
		return err
	}
	s.Adopt(h.Snapshot())
	h.live.Store(&inService{Snapshot: s, protocol: protocol})
	return nil
}

// Snapshot is the configuration in service, nil before the first Swap.
func (h *Handler) Snapshot() *engine.Snapshot {
	if live := h.live.Load(); live != nil {
		return live.Snapshot
	}
	return nil
}

// UpstreamProtocol is the one protocol cfg's policies forward with, empty
// when none selects the pod. The manager refuses policies that would give
// one pod two; a configuration that does anyway (a hand-written
// --policy-file) is refused, so that the enforcer keeps the one it runs.
func UpstreamProtocol(cfg *config.Config) (config.UpstreamProtocol, error) {
	if cfg == nil {
		return "", nil
	}
	var protocol config.UpstreamProtocol
	var first string
	for i := range cfg.Policies {
		p := &cfg.Policies[i]
		if p.Domain != "" {
			continue // the rate limit service's: it forwards nothing
		}
		switch got := p.UpstreamProtocol.OrDefault(); {
		case protocol == "":
			protocol, first = got, p.Name
		case got != protocol:
			return "", fmt.Errorf("policies %s and %s select this pod with different upstreamProtocol (%s, %s): "+
				"its enforcer speaks one protocol to the application; give both policies the same one", first, p.Name, protocol, got)
		}
	}
	return protocol, nil
}
