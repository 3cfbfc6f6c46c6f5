package transport

import (
	"context"
	"errors"
	"io"
	"log"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluice-dev/sluice/enforcer/request"
)

// grpcForwarder sends gRPC calls to an H2C application by calling the
// transport itself, the work of httputil.ReverseProxy without what a gRPC
// call over HTTP/2 does not need (cloning the request, deleting header
// fields one by one, a timer per response to flush it): the application
// receives the same request and the client the same answer
// (TestGRPCDirectMatchesReverseProxy holds it to the reverse proxy).
type grpcForwarder struct {
	target    *url.URL
	transport http.RoundTripper
	maxBody   int64
	errorLog  *log.Logger
}

func (f *grpcForwarder) forward(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	// A nil Content-Type: the application's, if it sent one, is added;
	// net/http guesses none (suppressSniffing).
	if _, ok := h["Content-Type"]; !ok {
		h["Content-Type"] = nil
	}
	body, err := limitBody(w, r, f.maxBody)
	if err != nil {
		return newForwardError(r, err)
	}
	c := &grpcCall{w: w}
	out := c.request(r, body, f.target)
	if out.Body != nil {
		// The transport may go on reading the body after the call, or
		// close it when it fails: neither reaches the client's.
		defer out.Body.Close()
	}
	res, err := f.transport.RoundTrip(out)
	c.mu.Lock()
	c.answered = true
	c.mu.Unlock()
	if err != nil {
		return newForwardError(out, err)
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		_ = res.Body.Close()
		return newForwardError(out, errors.New("the application switched protocols on a gRPC call"))
	}
	// An HTTP/2 application may send a length and trailers; the length
	// goes, as on the reverse proxy, so that no server drops them.
	if len(res.Trailer) > 0 && res.ContentLength >= 0 {
		res.Header.Del("Content-Length")
		res.ContentLength = -1
	}
	copyAnswerHeader(h, res.Header)
	announced := len(res.Trailer)
	if announced > 0 {
		names := make([]string, 0, announced)
		for k := range res.Trailer {
			names = append(names, k)
		}
		h.Add("Trailer", strings.Join(names, ", "))
	}
	w.WriteHeader(res.StatusCode)
	if err := f.copyBody(w, res); err != nil {
		defer res.Body.Close()
		// The answer has begun: all that is left is to reset the
		// client's stream, as the reverse proxy does under a server.
		if r.Context().Value(http.ServerContextKey) != nil {
			panic(http.ErrAbortHandler)
		}
		return nil
	}
	_ = res.Body.Close() // now, for res.Trailer
	if len(res.Trailer) > 0 {
		_ = http.NewResponseController(w).Flush()
	}
	if len(res.Trailer) == announced {
		// A declared trailer the application sent replaces the header
		// field of its name, which went with the head: the trailer the
		// client reads (a grpc-status) is the application's, not both, and
		// so is the one the enforcer reads.
		for k, vv := range res.Trailer {
			if len(vv) > 0 {
				h[k] = vv
			}
		}
		return nil
	}
	for k, vv := range res.Trailer {
		k = http.TrailerPrefix + k
		h[k] = append(h[k], vv...)
	}
	return nil
}

// copyBody copies res's body to w, flushed after every read when it is a
// stream (no length, or server-sent events): a gRPC message goes to the
// client as soon as the application has sent it.
func (f *grpcForwarder) copyBody(w http.ResponseWriter, res *http.Response) error {
	stream := res.ContentLength == -1
	if !stream {
		mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
		stream = mt == "text/event-stream"
	}
	flusher, _ := w.(http.Flusher)
	if flusher == nil {
		flush := http.NewResponseController(w).Flush
		flusher = flushFunc(func() { _ = flush() })
	}
	if stream {
		flusher.Flush() // the header, before any message
	}
	buf := copyBuffers.Get()
	defer copyBuffers.Put(buf)
	for {
		n, rerr := res.Body.Read(buf)
		if rerr != nil && rerr != io.EOF && !errors.Is(rerr, context.Canceled) {
			f.errorLog.Printf("transport: read error during a gRPC answer: %v", rerr)
		}
		if n > 0 {
			wn, werr := w.Write(buf[:n])
			if werr != nil {
				return werr
			}
			if wn != n {
				return io.ErrShortWrite
			}
			if stream {
				flusher.Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

type flushFunc func()

func (f flushFunc) Flush() { f() }

// grpcCall is one call's state, in one allocation: the 1xx answers it
// relays and the request body it lends the transport.
type grpcCall struct {
	w        http.ResponseWriter
	mu       sync.Mutex
	answered bool // the final answer came: no 1xx goes to w any more
	hints    int
	trace    httptrace.ClientTrace
	body     callBody
	url      url.URL
}

// request is the request sent for r: as the reverse proxy (newReverseProxy)
// sends it, with r's method, Host, path and query and r's header fields
// but the hop-by-hop ones (TE: trailers kept) and Expect.
func (c *grpcCall) request(r *http.Request, body io.ReadCloser, target *url.URL) *http.Request {
	c.trace.Got1xxResponse = c.informational
	ctx := httptrace.WithClientTrace(r.Context(), &c.trace)
	c.url = *r.URL
	c.url.ForceQuery = false
	out := (&http.Request{
		Method:        r.Method,
		URL:           &c.url,
		Proto:         r.Proto,
		ProtoMajor:    r.ProtoMajor,
		ProtoMinor:    r.ProtoMinor,
		Header:        forwardedHeader(r.Header),
		ContentLength: r.ContentLength,
		Trailer:       r.Trailer.Clone(),
		RemoteAddr:    r.RemoteAddr,
		RequestURI:    r.RequestURI,
	}).WithContext(ctx)
	if r.ContentLength != 0 && body != nil {
		c.body.rc = body
		out.Body = &c.body
	}
	// Path and query joined to the target's as the reverse proxy does.
	(&httputil.ProxyRequest{In: r, Out: out}).SetURL(target)
	out.Host = r.Host
	return out
}

// informational relays a 1xx answer but 100 Continue (the enforcer
// answers Expect itself), with the application's fields only, as
// finalHeaders does on the reverse proxy.
func (c *grpcCall) informational(code int, header textproto.MIMEHeader) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answered || code == http.StatusContinue || code == http.StatusSwitchingProtocols || c.hints >= maxInformational {
		return nil
	}
	c.hints++
	writeInformational(c.w, code, http.Header(header))
	return nil
}

// forwardedHeader is h without the fields the reverse proxy removes: the
// hop-by-hop ones (its list) and those Connection names, and Expect; TE
// becomes "trailers" when it names it, and a missing User-Agent an empty
// one (the transport adds none). The values are h's, not copies: nothing
// changes them.
func forwardedHeader(h http.Header) http.Header {
	out := make(http.Header, len(h)+1)
	connection := h["Connection"]
	for k, vv := range h {
		if reverseProxyHop(k) || k == "Expect" || (connection != nil && request.Listed(connection, k) && !isForwardingField(k)) {
			continue
		}
		out[k] = vv
	}
	switch te := h["Te"]; {
	case len(te) == 1 && te[0] == "trailers":
		out["Te"] = te
	case te != nil && request.Listed(te, "trailers"):
		out["Te"] = []string{"trailers"}
	}
	if _, ok := out["User-Agent"]; !ok {
		out["User-Agent"] = []string{""}
	}
	return out
}

// reverseProxyHop reports whether httputil.ReverseProxy removes the
// canonical field k as hop-by-hop.
func reverseProxyHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// isForwardingField reports whether k is one of the forwarding fields the reverse
// proxy sends as the handler set them.
func isForwardingField(k string) bool {
	for _, f := range forwardingHeaders {
		if k == f {
			return true
		}
	}
	return false
}

// copyAnswerHeader adds to dst the fields of the application's answer that
// the reverse proxy relays: all but the hop-by-hop ones.
func copyAnswerHeader(dst, src http.Header) {
	connection := src["Connection"]
	for k, vv := range src {
		if reverseProxyHop(k) || (connection != nil && request.Listed(connection, k)) {
			continue
		}
		dst[k] = append(dst[k], vv...)
	}
}

// callBody lends the request body to the transport: closing it does not
// close the client's, and once closed (the call is over) it reads nothing
// more of it.
type callBody struct {
	rc     io.ReadCloser
	closed atomic.Bool
}

var errCallOver = errors.New("transport: the gRPC call is over")

func (b *callBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errCallOver
	}
	return b.rc.Read(p)
}

func (b *callBody) Close() error {
	b.closed.Store(true)
	return nil
}
