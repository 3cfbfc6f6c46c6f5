package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A drained proxy answers the request in flight on a kept-alive
// connection with Connection: close, closes its idle connections, and
// /drain answers only after the delay.
func TestDrainClosesClientConnectionsAndWaits(t *testing.T) {
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	proxy := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = proxy.Serve(ln) }()
	defer proxy.Close()

	var dials int
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials++
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
	// get reports whether the answer said Connection: close.
	get := func() bool {
		resp, err := client.Get("http://" + ln.Addr().String() + "/")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		return resp.Close
	}
	g.Expect(get()).To(BeFalse(), "kept alive before the drain")
	g.Expect(get()).To(BeFalse())
	g.Expect(dials).To(Equal(1))

	d := &drainer{delay: 300 * time.Millisecond, proxy: proxy, log: slog.New(slog.DiscardHandler)}
	start := time.Now()
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, DrainPath, nil))
	g.Expect(time.Since(start)).To(BeNumerically(">=", 300*time.Millisecond))
	g.Expect(rec.Code).To(Equal(http.StatusOK))

	// The idle connection was closed: the client dials again, and the
	// answer tells it not to reuse the connection.
	g.Expect(get()).To(BeTrue(), "Connection: close after the drain")
	g.Expect(dials).To(Equal(2))

	// A second call, from another container's hook, waits as well.
	start = time.Now()
	d.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, DrainPath, nil))
	g.Expect(time.Since(start)).To(BeNumerically(">=", 300*time.Millisecond))
}
