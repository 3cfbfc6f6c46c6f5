package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// NewTransport is the transport to the application: a local process, so
// connections are kept alive and plenty of them idle (every concurrent
// client request needs one), dials fail fast, the environment's proxy
// settings are ignored, and bodies are passed as they are (no transparent
// gzip). No response timeout: long polls and streams are the application's
// business.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   2 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:           2048,
		MaxIdleConnsPerHost:    1024,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		WriteBufferSize:        16 << 10,
		ReadBufferSize:         16 << 10,
		MaxResponseHeaderBytes: maxResponseHead, // as the forwarder
	}
}

// NewUpstream is the reverse proxy to the application at target.
//
// The enforcer is meant to be invisible: the request keeps its Host header,
// X-Forwarded-For gets the client's address appended, and X-Forwarded-Host
// and X-Forwarded-Proto (and Forwarded) are kept when the client, typically
// an ingress, set them, else set to this hop's. Hop-by-hop headers are
// dropped, upgrades (WebSocket) are passed through, and streamed responses
// (unknown length, text/event-stream) are flushed as they arrive.
func NewUpstream(target *url.URL, transport http.RoundTripper, onError func(http.ResponseWriter, *http.Request, error)) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			// Rewrite starts with the X-Forwarded-* headers removed; put the
			// client's chain back so SetXForwarded appends to it.
			if v, ok := pr.In.Header["X-Forwarded-For"]; ok {
				pr.Out.Header["X-Forwarded-For"] = v
			}
			pr.SetXForwarded()
			for _, k := range []string{"X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"} {
				if v, ok := pr.In.Header[k]; ok {
					pr.Out.Header[k] = v
				}
			}
			// 100-continue is answered by this server when the body is
			// read, as nginx does. Passed on, the application's 100 would
			// be relayed carrying the rate limit headers, which the
			// reverse proxy then clears from the final response.
			pr.Out.Header.Del("Expect")
		},
		Transport:    transport,
		BufferPool:   copyBuffers,
		ErrorHandler: onError,
	}
}

// upstreamError answers 502 when the application cannot be reached, and
// nothing when the client itself went away.
func (h *Handler) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		return
	}
	h.rec.UpstreamError()
	writeProblem(w, &Problem{
		Type:   ProblemUpstreamUnavailable,
		Title:  "Bad Gateway",
		Status: http.StatusBadGateway,
		Detail: "The application behind the rate limiter could not be reached or did not answer.",
	})
}

// bufferPool reuses the proxy's body copy buffers (32 KiB each). The pool
// holds *[]byte; the emptied holders are pooled too, so that neither Get nor
// Put allocates once warm.
type bufferPool struct{ pool, holders sync.Pool }

var copyBuffers = &bufferPool{pool: sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}}

func (p *bufferPool) Get() []byte {
	h := p.pool.Get().(*[]byte)
	b := *h
	*h = nil
	p.holders.Put(h)
	return b
}

func (p *bufferPool) Put(b []byte) {
	h, _ := p.holders.Get().(*[]byte)
	if h == nil {
		h = new([]byte)
	}
	*h = b
	p.pool.Put(h)
}
