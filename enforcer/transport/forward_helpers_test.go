package transport

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// forwardPaths are the two ways an admitted request reaches the
// application: the forwarder, and the reverse proxy (upgrades, and every
// request when the application is not a plain http:// address or a
// Transport is given). Behaviour that both have is tested through both.
var forwardPaths = []string{"forwarder", "reverse-proxy"}

// fixture is an Upstream served on loopback.
type fixture struct {
	url      string
	upstream *Upstream
}

// serveWith is an Upstream made with opts in front of the application at
// appURL, with the reverse proxy taking every request when path says so.
// Each request arrives with rate limit headers of its own, as the proxy
// sets them before it forwards: they belong on the final response.
func serveWith(t *testing.T, path string, opts Options, appURL string) *fixture {
	t.Helper()
	opts.Target, _ = url.Parse(appURL)
	u := New(opts)
	if path == "reverse-proxy" {
		u.forwarder = nil
	}
	t.Cleanup(u.CloseIdleConnections)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Limit", "100")
		w.Header().Set("X-RateLimit-Remaining", "99")
		if err := u.Forward(w, r, config.UpstreamHTTP1, nil); err != nil {
			answerError(w, r, err)
		}
	}))
	t.Cleanup(srv.Close)
	return &fixture{url: srv.URL, upstream: u}
}

// serveVia is serveWith in front of an httptest server running app.
func serveVia(t *testing.T, path string, app http.Handler) *fixture {
	srv := httptest.NewServer(app)
	t.Cleanup(srv.Close)
	return serveWith(t, path, Options{}, srv.URL)
}

// answerError answers a request that could not be forwarded with the
// status the proxy gives it (its problem bodies are the proxy's own).
func answerError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadGateway
	switch {
	case BodyTimedOut(r, err):
		status = http.StatusRequestTimeout
	case errors.As(err, new(*http.MaxBytesError)):
		status = http.StatusRequestEntityTooLarge
	case errors.As(err, new(*RequestBodyError)):
		status = http.StatusBadRequest
	case IsResponseHeaderTimeout(err):
		status = http.StatusGatewayTimeout
	}
	if status == http.StatusBadRequest || status == http.StatusRequestTimeout {
		w.Header()["Connection"] = []string{"close"}
	}
	w.WriteHeader(status)
}

// answerErrorOf answers err, when there is one.
func answerErrorOf(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		answerError(w, r, err)
	}
}

// pathOnly serves requests by one forwarding path alone: the request the
// test sends is the one the path is given, its forwarding headers
// included. The reverse proxy has a transport that keeps connections
// alive, as one given in Options would, so that it writes requests as the
// library does for any.
func pathOnly(t *testing.T, path string, opts Options, appURL string) string {
	t.Helper()
	opts.Target, _ = url.Parse(appURL)
	var serve http.HandlerFunc
	if path == "forwarder" {
		fw := newForwarder(opts.Target, opts.ResponseHeaderTimeout, opts.MaxRequestBody)
		t.Cleanup(fw.closeIdle)
		serve = func(w http.ResponseWriter, r *http.Request) { answerErrorOf(w, r, fw.forward(w, r)) }
	} else {
		tr := NewHTTP1()
		tr.ResponseHeaderTimeout = opts.ResponseHeaderTimeout
		t.Cleanup(tr.CloseIdleConnections)
		rp := &reverseProxy{proxy: newReverseProxy(opts.Target, tr), maxBody: opts.MaxRequestBody}
		serve = func(w http.ResponseWriter, r *http.Request) { answerErrorOf(w, r, rp.forward(w, r)) }
	}
	srv := httptest.NewServer(serve)
	t.Cleanup(srv.Close)
	return srv.URL
}

// pooled counts the connections idle in f's pool, and those of them the
// application has closed, as the check before reuse sees them.
func (f *forwarder) pooled() (idle, closed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.idle {
		if !alive(c) {
			closed++
		}
	}
	return len(f.idle), closed
}

type response struct {
	status int
	header http.Header
	body   string
}

func get(g Gomega, url string) response {
	resp, err := http.Get(url)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return response{resp.StatusCode, resp.Header, string(body)}
}
