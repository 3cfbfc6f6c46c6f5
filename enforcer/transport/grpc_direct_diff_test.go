package transport

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// grpcPaths are the two ways a gRPC call can reach an H2C application:
// httputil's reverse proxy, and the transport called directly (grpcCall).
var grpcPaths = []string{"reverse-proxy", "direct"}

// appSaw is what the application received.
type appSaw struct {
	Method, Host, Path, RawPath, RawQuery string
	Header, Trailer                       http.Header
	Body                                  string
	Cancelled                             bool // the request's context ended before the handler returned
}

// clientSaw is what the client received.
type clientSaw struct {
	Status        int
	Header        http.Header
	Informational []string // "103 Link=[...]"
	Body          string
	Trailer       http.Header
	Err           string
}

// grpcDiffCase is one call: what the application does, and how the client
// calls (nil: one request with body, read whole).
type grpcDiffCase struct {
	name   string
	path   string // with the query
	header http.Header
	body   string
	app    func(w http.ResponseWriter, r *http.Request, s *caseState)
	call   func(g Gomega, c *http.Client, req *http.Request, s *caseState) clientSaw
	check  func(g Gomega, app appSaw, client clientSaw)
}

// caseState is what a case's application and client share.
type caseState struct {
	step chan struct{} // the client's go-ahead for the application's next write
	conn net.Conn      // the application's end of the connection
}

func grpcHeader(kv ...string) http.Header {
	h := http.Header{"Content-Type": {"application/grpc"}, "Te": {"trailers"}}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// message is a gRPC length-prefixed message of n bytes of c.
func message(c byte, n int) string {
	p := []byte{0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	return string(p) + strings.Repeat(string(c), n)
}

// TestGRPCDirectMatchesReverseProxy holds the direct path of gRPC calls to
// httputil's reverse proxy: the same calls, made once through each in
// front of the same cleartext HTTP/2 application, must reach it with the
// same method, authority, path, query, header fields and body, and bring
// the client the same status, header fields, 1xx answers, body, trailers
// and errors. Both paths carry the rate limit headers the proxy sets, under
// sluice-enforcer's default request limits.
func TestGRPCDirectMatchesReverseProxy(t *testing.T) {
	bin := base64.RawStdEncoding.EncodeToString([]byte{0, 1, 2, 0xff})
	unaryApp := func(w http.ResponseWriter, r *http.Request, _ *caseState) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Encoding", "identity")
		w.Header().Set("X-Reply-Bin", bin)
		w.Header().Set("Proxy-Authenticate", "Basic") // hop-by-hop: dropped
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
		w.Header().Set(http.TrailerPrefix+"Grpc-Message", "ok")
		w.Header().Set(http.TrailerPrefix+"X-Trace-Bin", bin)
		_, _ = io.WriteString(w, message('r', 12))
	}
	cases := []grpcDiffCase{
		{
			name: "unary call with metadata",
			path: "/shop.v1.Orders/Create",
			header: grpcHeader("Grpc-Timeout", "5S", "User-Agent", "grpc-go/1.85.0", "X-Tenant-Id", "t1",
				"X-Request-Bin", bin, "Grpc-Accept-Encoding", "gzip", "X-Multi", "a", "X-Multi", "b",
				"X-Forwarded-For", "203.0.113.9", "Forwarded", "for=203.0.113.9", "Proxy-Authorization", "Basic eDp5",
				"Trailer", "X-Never"),
			body: message('q', 20),
			app:  unaryApp,
			check: func(g Gomega, app appSaw, client clientSaw) {
				g.Expect(app.Header).To(HaveKeyWithValue("Te", []string{"trailers"}))
				g.Expect(app.Header).To(HaveKeyWithValue("Grpc-Timeout", []string{"5S"}))
				g.Expect(app.Header).To(HaveKeyWithValue("X-Request-Bin", []string{bin}))
				g.Expect(app.Header).To(HaveKeyWithValue("X-Forwarded-For", []string{"203.0.113.9"}))
				g.Expect(app.Header).NotTo(HaveKey("Proxy-Authorization"))
				g.Expect(app.Host).To(Equal("shop.example.com"))
				g.Expect(client.Header).To(HaveKeyWithValue("X-Ratelimit-Remaining", []string{"99"}))
				g.Expect(client.Header).NotTo(HaveKey("Proxy-Authenticate"))
				g.Expect(client.Trailer).To(Equal(http.Header{"Grpc-Status": {"0"}, "Grpc-Message": {"ok"}, "X-Trace-Bin": {bin}}))
				g.Expect(client.Body).To(Equal(message('r', 12)))
			},
		},
		{
			name:   "a query, an escaped path, no user agent",
			path:   "/shop.v1.Orders/a%2Fb;v=1?page=2&q=a;b",
			header: grpcHeader("User-Agent", ""),
			body:   message('q', 3),
			app:    unaryApp,
			check: func(g Gomega, app appSaw, _ clientSaw) {
				g.Expect(app.RawQuery).To(Equal("page=2&q=a;b"))
				g.Expect(app.RawPath).To(Equal("/shop.v1.Orders/a%2Fb;v=1"))
				g.Expect(app.Header).NotTo(HaveKey("User-Agent"))
			},
		},
		{
			name:   "declared trailers",
			path:   "/shop.v1.Orders/Get",
			header: grpcHeader(),
			body:   message('q', 1),
			app: func(w http.ResponseWriter, r *http.Request, _ *caseState) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/grpc")
				w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
				_, _ = io.WriteString(w, message('r', 4))
				w.Header().Set("Grpc-Status", "0")
				w.Header().Set("Grpc-Message", "declared")
			},
			check: func(g Gomega, _ appSaw, client clientSaw) {
				g.Expect(client.Trailer).To(Equal(http.Header{"Grpc-Status": {"0"}, "Grpc-Message": {"declared"}}))
			},
		},
		{
			name:   "a declared trailer also sent in the header",
			path:   "/shop.v1.Orders/Get",
			header: grpcHeader(),
			body:   message('q', 1),
			app: func(w http.ResponseWriter, r *http.Request, _ *caseState) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/grpc")
				w.Header().Set("Grpc-Status", "0")
				w.Header().Set("Trailer", "Grpc-Status")
				_, _ = io.WriteString(w, message('r', 4))
				w.Header().Set("Grpc-Status", "16")
			},
			check: func(g Gomega, _ appSaw, client clientSaw) {
				g.Expect(client.Header).To(HaveKeyWithValue("Grpc-Status", []string{"0"}))
				g.Expect(client.Trailer).To(Equal(http.Header{"Grpc-Status": {"16"}}), "the trailer the application sent, alone")
			},
		},
		{
			name:   "trailers-only answer",
			path:   "/shop.v1.Orders/Get",
			header: grpcHeader(),
			body:   message('q', 1),
			app: func(w http.ResponseWriter, r *http.Request, _ *caseState) {
				w.Header().Set("Content-Type", "application/grpc")
				w.Header().Set("Grpc-Status", "5")
				w.Header().Set("Grpc-Message", "order not found")
				w.WriteHeader(http.StatusOK)
			},
			check: func(g Gomega, _ appSaw, client clientSaw) {
				g.Expect(client.Header).To(HaveKeyWithValue("Grpc-Status", []string{"5"}))
				g.Expect(client.Body).To(BeEmpty())
				g.Expect(client.Trailer).To(BeEmpty())
			},
		},
		{
			name:   "headers, then trailers and no body",
			path:   "/shop.v1.Orders/Watch",
			header: grpcHeader(),
			body:   message('q', 1),
			app: func(w http.ResponseWriter, r *http.Request, s *caseState) {
				w.Header().Set("Content-Type", "application/grpc")
				w.Header().Set("X-Early", "1")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				awaitStep(s) // the client has the headers before anything else is sent
				w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
			},
			call: func(g Gomega, c *http.Client, req *http.Request, s *caseState) clientSaw {
				resp, err := c.Do(req)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(s.next()).To(Succeed(), "the application is waiting")
				return readAll(resp, nil)
			},
			check: func(g Gomega, _ appSaw, client clientSaw) {
				g.Expect(client.Header).To(HaveKeyWithValue("X-Early", []string{"1"}))
				g.Expect(client.Trailer).To(Equal(http.Header{"Grpc-Status": {"0"}}))
			},
		},
		{
			name:   "100 Continue and 103 Early Hints",
			path:   "/shop.v1.Orders/Create",
			header: grpcHeader(),
			body:   message('q', 1),
			app: func(w http.ResponseWriter, r *http.Request, s *caseState) {
				w.WriteHeader(http.StatusContinue)
				w.Header().Set("Link", "</a.css>; rel=preload")
				w.WriteHeader(http.StatusEarlyHints)
				w.Header().Del("Link")
				unaryApp(w, r, s)
			},
			check: func(g Gomega, _ appSaw, client clientSaw) {
				g.Expect(client.Informational).To(Equal([]string{"103 map[Link:[</a.css>; rel=preload]]"}))
				g.Expect(client.Header).To(HaveKeyWithValue("X-Ratelimit-Remaining", []string{"99"}))
			},
		},
		{
			name:   "a server stream flushed message by message",
			path:   "/shop.v1.Orders/Watch",
			header: grpcHeader(),
			body:   message('q', 1),
			app: func(w http.ResponseWriter, r *http.Request, s *caseState) {
				w.Header().Set("Content-Type", "application/grpc")
				for i := range 5 {
					_, _ = io.WriteString(w, message('0'+byte(i), 100))
					w.(http.Flusher).Flush()
					if !awaitStep(s) {
						return
					}
				}
				w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
			},
			call: func(g Gomega, c *http.Client, req *http.Request, s *caseState) clientSaw {
				resp, err := c.Do(req)
				g.Expect(err).NotTo(HaveOccurred())
				msg := make([]byte, len(message('0', 100)))
				var got strings.Builder
				for range 5 {
					_, err := io.ReadFull(resp.Body, msg)
					g.Expect(err).NotTo(HaveOccurred(), "each message arrives before the next is sent")
					got.Write(msg)
					g.Expect(s.next()).To(Succeed(), "the application is waiting")
				}
				saw := readAll(resp, nil)
				saw.Body = got.String() + saw.Body
				return saw
			},
			check: func(g Gomega, _ appSaw, client clientSaw) {
				g.Expect(client.Body).To(HaveLen(5 * 105))
				g.Expect(client.Trailer).To(Equal(http.Header{"Grpc-Status": {"0"}}))
			},
		},
		{
			name:   "a full-duplex stream",
			path:   "/shop.v1.Orders/Chat",
			header: grpcHeader(),
			app: func(w http.ResponseWriter, r *http.Request, _ *caseState) {
				w.Header().Set("Content-Type", "application/grpc")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				msg := make([]byte, len(message('x', 10)))
				for {
					if _, err := io.ReadFull(r.Body, msg); err != nil {
						break
					}
					_, _ = w.Write(msg)
					w.(http.Flusher).Flush()
				}
				w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
			},
			call: func(g Gomega, c *http.Client, req *http.Request, _ *caseState) clientSaw {
				pr, pw := io.Pipe()
				req.Body, req.ContentLength = pr, -1
				resp, err := c.Do(req)
				g.Expect(err).NotTo(HaveOccurred())
				msg := make([]byte, len(message('x', 10)))
				var got strings.Builder
				for i := range 3 {
					_, _ = io.WriteString(pw, message('a'+byte(i), 10))
					_, err := io.ReadFull(resp.Body, msg)
					g.Expect(err).NotTo(HaveOccurred(), "each echo arrives before the next message is sent")
					got.Write(msg)
				}
				_ = pw.Close()
				saw := readAll(resp, nil)
				saw.Body = got.String() + saw.Body
				return saw
			},
			check: func(g Gomega, app appSaw, client clientSaw) {
				g.Expect(app.Body).To(Equal(message('a', 10) + message('b', 10) + message('c', 10)))
				g.Expect(client.Body).To(Equal(app.Body))
			},
		},
		{
			name:   "a 1 MiB message each way",
			path:   "/shop.v1.Orders/Upload",
			header: grpcHeader(),
			body:   message('u', 1<<20),
			app: func(w http.ResponseWriter, r *http.Request, _ *caseState) {
				w.Header().Set("Content-Type", "application/grpc")
				_, _ = io.Copy(w, r.Body)
				w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
			},
			check: func(g Gomega, app appSaw, client clientSaw) {
				g.Expect(app.Body).To(HaveLen(5 + 1<<20))
				g.Expect(client.Body).To(Equal(app.Body))
			},
		},
		{
			name:   "a non-gRPC answer with a length",
			path:   "/shop.v1.Orders/Create",
			header: grpcHeader(),
			body:   message('q', 1),
			app: func(w http.ResponseWriter, r *http.Request, _ *caseState) {
				w.Header().Set("Content-Type", "text/plain")
				w.Header().Set("Content-Length", "12")
				w.WriteHeader(http.StatusUnsupportedMediaType)
				_, _ = io.WriteString(w, "unsupported\n")
			},
			check: func(g Gomega, _ appSaw, client clientSaw) {
				g.Expect(client.Status).To(Equal(http.StatusUnsupportedMediaType))
				g.Expect(client.Body).To(Equal("unsupported\n"))
			},
		},
		{
			name:   "headers later than the response header timeout",
			path:   "/shop.v1.Orders/Watch",
			header: grpcHeader(),
			body:   message('q', 1),
			app: func(w http.ResponseWriter, r *http.Request, s *caseState) {
				time.Sleep(3 * grpcDiffHeaderTimeout)
				unaryApp(w, r, s)
			},
			check: func(g Gomega, _ appSaw, client clientSaw) {
				g.Expect(client.Status).To(Equal(http.StatusOK))
				g.Expect(client.Trailer).To(HaveKeyWithValue("Grpc-Status", []string{"0"}))
			},
		},
		{
			name:   "the client cancels mid-stream",
			path:   "/shop.v1.Orders/Watch",
			header: grpcHeader(),
			body:   message('q', 1),
			app: func(w http.ResponseWriter, r *http.Request, _ *caseState) {
				w.Header().Set("Content-Type", "application/grpc")
				_, _ = io.WriteString(w, message('1', 10))
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-time.After(10 * time.Second):
				}
			},
			call: func(g Gomega, c *http.Client, req *http.Request, _ *caseState) clientSaw {
				ctx, cancel := context.WithCancel(req.Context())
				resp, err := c.Do(req.WithContext(ctx))
				g.Expect(err).NotTo(HaveOccurred())
				msg := make([]byte, len(message('1', 10)))
				_, err = io.ReadFull(resp.Body, msg)
				g.Expect(err).NotTo(HaveOccurred())
				cancel()
				saw := readAll(resp, nil)
				saw.Body = string(msg) + saw.Body
				return saw
			},
			check: func(g Gomega, app appSaw, client clientSaw) {
				g.Expect(app.Cancelled).To(BeTrue(), "the application's call is cancelled")
				g.Expect(client.Err).To(ContainSubstring("context canceled"))
			},
		},
		{
			name:   "the application resets the stream before answering",
			path:   "/shop.v1.Orders/Create",
			header: grpcHeader(),
			body:   message('q', 1),
			app: func(w http.ResponseWriter, r *http.Request, _ *caseState) {
				panic(http.ErrAbortHandler)
			},
			check: func(g Gomega, _ appSaw, client clientSaw) {
				g.Expect(client.Status).To(Equal(http.StatusBadGateway), "onError answers")
				g.Expect(client.Header).To(HaveKeyWithValue("X-Ratelimit-Remaining", []string{"99"}))
			},
		},
		{
			name:   "the application resets the stream after a message",
			path:   "/shop.v1.Orders/Watch",
			header: grpcHeader(),
			body:   message('q', 1),
			app: func(w http.ResponseWriter, r *http.Request, _ *caseState) {
				w.Header().Set("Content-Type", "application/grpc")
				_, _ = io.WriteString(w, message('1', 10))
				w.(http.Flusher).Flush()
				time.Sleep(50 * time.Millisecond)
				panic(http.ErrAbortHandler)
			},
			check: func(g Gomega, _ appSaw, client clientSaw) {
				g.Expect(client.Status).To(Equal(http.StatusOK))
				g.Expect(client.Body).To(Equal(message('1', 10)))
				g.Expect(client.Err).To(ContainSubstring("INTERNAL_ERROR"), "the client's stream is reset")
			},
		},
		{
			name:   "the application closes the connection before answering",
			path:   "/shop.v1.Orders/Create",
			header: grpcHeader(),
			body:   message('q', 1),
			app: func(w http.ResponseWriter, r *http.Request, s *caseState) {
				_ = s.conn.Close()
				awaitCancel(r)
			},
			check: func(g Gomega, _ appSaw, client clientSaw) {
				g.Expect(client.Status).To(Equal(http.StatusBadGateway))
			},
		},
		{
			name:   "the application closes the connection after a message",
			path:   "/shop.v1.Orders/Watch",
			header: grpcHeader(),
			body:   message('q', 1),
			app: func(w http.ResponseWriter, r *http.Request, s *caseState) {
				w.Header().Set("Content-Type", "application/grpc")
				_, _ = io.WriteString(w, message('1', 10))
				w.(http.Flusher).Flush()
				time.Sleep(50 * time.Millisecond)
				_ = s.conn.Close()
				awaitCancel(r)
			},
			check: func(g Gomega, _ appSaw, client clientSaw) {
				g.Expect(client.Body).To(Equal(message('1', 10)))
				g.Expect(client.Err).To(ContainSubstring("INTERNAL_ERROR"))
			},
		},
	}

	app := newH2CApp(t)
	fronts := map[string]string{}
	for _, path := range grpcPaths {
		fronts[path] = serveGRPC(t, path, Options{ResponseHeaderTimeout: grpcDiffHeaderTimeout, Limits: DefaultRequestLimits,
			ErrorLog: log.New(io.Discard, "", 0)}, app.url)
	}
	client := &http.Client{Transport: h2cClient(t)}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			apps, clients := map[string]appSaw{}, map[string]clientSaw{}
			for _, path := range grpcPaths {
				// A call first, so that the connections the case uses are
				// open before the goroutines are counted.
				received := app.serve(func(w http.ResponseWriter, r *http.Request, _ net.Conn) { unaryApp(w, r, nil) })
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				warm, err := http.NewRequestWithContext(ctx, http.MethodPost, fronts[path]+"/shop.v1.Orders/Get", strings.NewReader(message('q', 1)))
				g.Expect(err).NotTo(HaveOccurred())
				warm.Header = grpcHeader()
				g.Expect(callAndRead(client, warm).Status).To(Equal(http.StatusOK))
				g.Eventually(received, 10*time.Second).Should(Receive())
				goroutines := settledGoroutines()

				s := &caseState{step: make(chan struct{})}
				received = app.serve(func(w http.ResponseWriter, r *http.Request, conn net.Conn) {
					s.conn = conn
					tc.app(w, r, s)
				})
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, fronts[path]+tc.path, strings.NewReader(tc.body))
				g.Expect(err).NotTo(HaveOccurred())
				req.ContentLength = -1 // as gRPC clients send them
				req.Host = "shop.example.com"
				req.Header = tc.header.Clone()
				var got clientSaw
				if tc.call != nil {
					got = tc.call(g, client, req, s)
				} else {
					got = callAndRead(client, req)
				}
				var saw appSaw
				g.Eventually(received, 10*time.Second).Should(Receive(&saw), path)
				apps[path] = saw
				clients[path] = got
				g.Eventually(runtime.NumGoroutine, 10*time.Second).Should(BeNumerically("<=", goroutines),
					"%s: no goroutine is left behind", path)
			}
			rp, direct := apps["reverse-proxy"], apps["direct"]
			g.Expect(direct).To(Equal(rp), "what the application received")
			g.Expect(clients["direct"]).To(Equal(clients["reverse-proxy"]), "what the client received")
			if tc.check != nil {
				tc.check(g, rp, clients["reverse-proxy"])
			}
		})
	}
}

// grpcDiffHeaderTimeout is the response header timeout of both paths, which
// gRPC calls are not held to.
const grpcDiffHeaderTimeout = 150 * time.Millisecond

// settledGoroutines is the number of goroutines once it has stopped
// falling.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 50 {
		time.Sleep(10 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			return max(m, n)
		}
		n = m
	}
	return n
}

// awaitCancel waits for the end of r's context, which a closed connection
// brings.
func awaitCancel(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
	}
}

// next lets the application write on.
func (s *caseState) next() error {
	select {
	case s.step <- struct{}{}:
		return nil
	case <-time.After(5 * time.Second):
		return errors.New("the application waits no more")
	}
}

func awaitStep(s *caseState) bool {
	select {
	case <-s.step:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// callAndRead makes req and reads its answer whole.
func callAndRead(c *http.Client, req *http.Request) clientSaw {
	var mu sync.Mutex
	var informational []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		mu.Lock()
		defer mu.Unlock()
		informational = append(informational, fmt.Sprintf("%d %s", code, formatHeader(http.Header(h))))
		return nil
	}}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := c.Do(req)
	if err != nil {
		return clientSaw{Err: cleanError(err)}
	}
	mu.Lock()
	defer mu.Unlock()
	return readAll(resp, informational)
}

// formatHeader is h in sorted order.
func formatHeader(h http.Header) string {
	var b strings.Builder
	b.WriteString("map[")
	for i, k := range slices.Sorted(maps.Keys(h)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + ":[" + strings.Join(h[k], " ") + "]")
	}
	b.WriteString("]")
	return b.String()
}

// readAll reads resp's body and trailers; the header fields that vary from
// one answer to the next (Date) go, and the names of announced trailers
// are sorted.
func readAll(resp *http.Response, informational []string) clientSaw {
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	h := resp.Header.Clone()
	delete(h, "Date")
	if tr := h["Trailer"]; tr != nil {
		var names []string
		for _, v := range tr {
			for n := range strings.SplitSeq(v, ",") {
				names = append(names, strings.TrimSpace(n))
			}
		}
		slices.Sort(names)
		h["Trailer"] = names
	}
	saw := clientSaw{Status: resp.StatusCode, Header: h, Informational: informational, Body: string(body), Trailer: resp.Trailer}
	if err != nil {
		saw.Err = cleanError(err)
	}
	if len(saw.Trailer) == 0 {
		saw.Trailer = nil
	}
	return saw
}

var streamID = regexp.MustCompile(`stream ID \d+`)

func cleanError(err error) string {
	return streamID.ReplaceAllString(err.Error(), "stream ID N")
}

// h2cApp is a cleartext HTTP/2 application whose handler each call sets.
type h2cApp struct {
	url     string
	mu      sync.Mutex
	handler func(http.ResponseWriter, *http.Request, net.Conn)
	saw     chan appSaw
}

type connKey struct{}

func newH2CApp(t *testing.T) *h2cApp {
	a := &h2cApp{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(a.serveHTTP))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

// serve sets the handler of the calls to come, and is where what they
// received will be.
func (a *h2cApp) serve(h func(http.ResponseWriter, *http.Request, net.Conn)) <-chan appSaw {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.handler = h
	a.saw = make(chan appSaw, 4)
	return a.saw
}

func (a *h2cApp) serveHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	h, received := a.handler, a.saw
	a.mu.Unlock()
	var body bytes.Buffer
	saw := appSaw{Method: r.Method, Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone()}
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(r.Body, &body), r.Body}
	defer func() {
		saw.Body = body.String()
		saw.Cancelled = r.Context().Err() != nil
		saw.Trailer = r.Trailer
		select {
		case received <- saw:
		default:
		}
	}()
	h(w, r, r.Context().Value(connKey{}).(net.Conn))
}

// serveGRPC is an H2C front whose gRPC calls take path, in front of the
// application at appURL; every call carries rate limit headers of its own.
func serveGRPC(t testing.TB, path string, opts Options, appURL string) string {
	t.Helper()
	opts.Target, _ = url.Parse(appURL)
	u := New(opts)
	if path == "reverse-proxy" {
		u.h2cCalls = u.through(opts, u.h2cTransports[1])
	}
	t.Cleanup(u.CloseIdleConnections)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Limit", "100")
		w.Header().Set("X-RateLimit-Remaining", "99")
		answerErrorOf(w, r, u.Forward(w, r, config.UpstreamH2C, nil))
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// h2cClient is a client speaking cleartext HTTP/2 with prior knowledge.
func h2cClient(t testing.TB) *http.Transport {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// BenchmarkGRPCUnaryCall is a unary call through either path, the client
// and the application in the same process: their costs are the same on
// both, the difference is the path's.
func BenchmarkGRPCUnaryCall(b *testing.B) {
	reply := message('r', 12)
	app := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
		_, _ = io.WriteString(w, reply)
	}))
	app.Config.Protocols = new(http.Protocols)
	app.Config.Protocols.SetUnencryptedHTTP2(true)
	app.Start()
	b.Cleanup(app.Close)
	client := &http.Client{Transport: h2cClient(b)}
	body := message('q', 20)
	for _, path := range grpcPaths {
		front := serveGRPC(b, path, Options{}, app.URL)
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, front+"/shop.v1.Orders/Create", strings.NewReader(body))
				req.ContentLength = -1
				req.Header = grpcHeader("Grpc-Timeout", "5S", "User-Agent", "grpc-go/1.85.0", "X-Tenant-Id", "t1")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.Trailer.Get("Grpc-Status") != "0" {
					b.Fatalf("grpc-status %q", resp.Trailer.Get("Grpc-Status"))
				}
			}
		})
	}
}
