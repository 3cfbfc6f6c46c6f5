package transport

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/enforcer/request"
)

// NewHTTP1 is the transport to the application: a local process, so
// connections are kept alive and plenty of them idle (every concurrent
// client request needs one), dials fail fast, the environment's proxy
// settings are ignored, and bodies are passed as they are (no transparent
// gzip). No response timeout: New sets the one its Options give.
func NewHTTP1() *http.Transport {
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

// NewH2C is the transport to an application that speaks cleartext HTTP/2
// with prior knowledge (gRPC servers): every call a stream of a few
// multiplexed connections, a connection that stops answering pings
// replaced. Otherwise as NewHTTP1.
func NewH2C() *http.Transport {
	t := NewHTTP1()
	dial := t.DialContext
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// The application's frames coalesced (h2Conn); a write the
		// application takes nothing of for this long fails the
		// connection, as a silent one fails its pings.
		return newH2ClientConn(c, h2cWriteTimeout), nil
	}
	t.Protocols = new(http.Protocols)
	t.Protocols.SetUnencryptedHTTP2(true)
	t.HTTP2 = &http.HTTP2Config{
		// A connection silent this long is pinged, and dropped if the
		// ping goes unanswered: its calls fail instead of hanging.
		SendPingTimeout: 30 * time.Second,
		PingTimeout:     15 * time.Second,
	}
	return t
}

// h2cWriteTimeout bounds a write to an H2C application that takes no byte.
const h2cWriteTimeout = 45 * time.Second

// forwardingHeaders are the fields the handler sets to their final values;
// the reverse proxy removes them before Rewrite.
var forwardingHeaders = [...]string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"}

// newReverseProxy is the reverse proxy to the application at target.
//
// It sends the request as the handler decided on it, as the forwarder
// does: the same Host, query and forwarding headers (X-Forwarded-For,
// -Host, -Proto, Forwarded, which the handler has set), without hop-by-hop
// headers, with upgrades (WebSocket) passed through and streamed responses
// (unknown length, text/event-stream) flushed as they arrive.
func newReverseProxy(target *url.URL, transport http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The query the handler matched, even the parameters the
			// proxy would drop as unparsable (";"), and no bare "?".
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
			pr.Out.URL.ForceQuery = false
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			for _, k := range forwardingHeaders {
				if v, ok := pr.In.Header[k]; ok {
					pr.Out.Header[k] = v
				}
			}
			// 100-continue is answered by this server when the body is
			// read, as nginx does.
			pr.Out.Header.Del("Expect")
		},
		// An HTTP/2 application may send a length and trailers; an
		// HTTP/1.1 client can get trailers only in a chunked body, so the
		// length goes, and with it the server's reason to drop them.
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusSwitchingProtocols {
				// The proxy writes a 101 to the protocol asked for itself, on
				// the hijacked connection; any other is a 502.
				f, ok := resp.Request.Context().Value(upgradeFilterKey{}).(*privateFields)
				if ok && request.Listed(resp.Header["Connection"], "Upgrade") &&
					strings.EqualFold(resp.Header.Get("Upgrade"), resp.Request.Header.Get("Upgrade")) {
					f.take(resp.StatusCode, resp.Header)
				}
				return nil
			}
			if len(resp.Trailer) > 0 && resp.ContentLength >= 0 {
				resp.Header.Del("Content-Length")
				resp.ContentLength = -1
			}
			return nil
		},
		Transport:    transport,
		BufferPool:   copyBuffers,
		ErrorHandler: keepError,
	}
}

// keepError keeps the error of an exchange the reverse proxy could not
// complete, for its caller to answer: nothing was written yet.
func keepError(w http.ResponseWriter, r *http.Request, err error) {
	if fw, ok := w.(*finalHeaders); ok && fw.err == nil {
		fw.err = newForwardError(r, err)
	}
}

// reverseProxy is the path of the requests the forwarder does not take,
// under the same body limit and 1xx rules.
type reverseProxy struct {
	proxy   *httputil.ReverseProxy
	maxBody int64
}

func (p *reverseProxy) forward(w http.ResponseWriter, r *http.Request) error {
	// A nil Content-Type: the proxy adds the application's, if it sent
	// one, and net/http guesses none (suppressSniffing).
	if _, ok := w.Header()["Content-Type"]; !ok {
		w.Header()["Content-Type"] = nil
	}
	body, err := limitBody(w, r, p.maxBody)
	if err != nil {
		return newForwardError(r, err)
	}
	if body != r.Body {
		limited := *r
		limited.Body = body
		r = &limited
	}
	if r.Header["Upgrade"] != nil {
		if f := privateOf(w); f != nil {
			r = r.WithContext(context.WithValue(r.Context(), upgradeFilterKey{}, f))
		}
	}
	if r.ContentLength != 0 {
		// The transport reads the body while the response is copied.
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	fw := &finalHeaders{ResponseWriter: w}
	p.proxy.ServeHTTP(fw, r)
	if fw.err != nil {
		// the enforcer's own fields go on the answer its caller writes
		fw.restore(w.Header())
		return fw.err
	}
	fw.replaceHeaderFields()
	return nil
}

// finalHeaders keeps the enforcer's own header fields (the rate limit
// headers) for the final response. The reverse proxy relays a 1xx with
// the whole header map, then clears the map: they would be on the 103 and
// missing from the final answer. Like the forwarder, it drops 100 Continue
// (the enforcer answers Expect) and relays the other 1xx answers with the
// application's fields only, but the private fields of its AnswerHead.
type finalHeaders struct {
	http.ResponseWriter
	own     http.Header // the map as the handler left it, once the proxy uses it
	cleared bool        // a 1xx was written: own goes back before the map is used again
	hints   int
	// headed counts the values the final head had for the names its
	// Trailer field declares: the proxy appends the trailer's to them.
	headed map[string]int
	// err is why the exchange failed, nil while it did not.
	err *ForwardError
}

// replaceHeaderFields leaves a declared trailer with the application's
// trailer values alone, as the forwarders do: the head's went with it, and
// a client reading the trailer's grpc-status reads the one the enforcer
// reads.
func (w *finalHeaders) replaceHeaderFields() {
	h := w.ResponseWriter.Header()
	for k, n := range w.headed {
		if vv := h[k]; len(vv) > n {
			h[k] = vv[n:]
		}
	}
}

func (w *finalHeaders) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *finalHeaders) Header() http.Header {
	h := w.ResponseWriter.Header()
	if w.own == nil {
		w.own = h.Clone()
	}
	w.restore(h)
	return h
}

func (w *finalHeaders) restore(h http.Header) {
	if w.cleared {
		w.cleared = false
		for k, vv := range w.own {
			h[k] = append(vv[:len(vv):len(vv)], h[k]...)
		}
	}
}

func (w *finalHeaders) WriteHeader(code int) {
	h := w.ResponseWriter.Header()
	if code < 100 || code > 199 || code == http.StatusSwitchingProtocols {
		w.restore(h)
		w.ResponseWriter.WriteHeader(code)
		// as it went: the writer below may have taken fields out
		for _, v := range h["Trailer"] {
			for _, k := range strings.Split(v, ",") {
				k = http.CanonicalHeaderKey(strings.TrimSpace(k))
				if n := len(h[k]); n > 0 {
					if w.headed == nil {
						w.headed = make(map[string]int, 1)
					}
					w.headed[k] = n
				}
			}
		}
		return
	}
	// The proxy appended the application's fields to ours.
	fields := make(http.Header, len(h))
	for k, vv := range h {
		if mine := len(w.own[k]); mine > 0 {
			vv = vv[min(mine, len(vv)):]
		}
		if len(vv) > 0 {
			fields[k] = vv
		}
	}
	if code != http.StatusContinue && w.hints < maxInformational {
		w.hints++
		clear(h)
		copyEndToEnd(h, fields)
		filterHead(w.ResponseWriter, code, h)
		w.ResponseWriter.WriteHeader(code)
	}
	clear(h)
	w.cleared = true
}

// IsResponseHeaderTimeout reports whether err is the forwarder's response
// header timeout or the transport's: a timeout that is not a dial's.
func IsResponseHeaderTimeout(err error) bool {
	if errors.Is(err, errResponseHeaderTimeout) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
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
