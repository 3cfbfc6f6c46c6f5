package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// bareProxy is the cheapest reverse proxy net/http makes: an
// httputil.ReverseProxy to one application, with no decision, its
// transport kept alive to that application as the enforcer's is
// (transport.NewHTTP1). It is the floor the enforcer's HTTP/1.1 path is
// measured against (hack/bench-proxy.sh, target bare-proxy).
func bareProxy(target *url.URL, errorLog *log.Logger) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The enforcer also keeps the client's Host and sets the
			// X-Forwarded-* fields.
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          2048,
			MaxIdleConnsPerHost:   1024,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
			DisableCompression:    true,
			WriteBufferSize:       16 << 10,
			ReadBufferSize:        16 << 10,
		},
		// Without a pool every response body would be copied through a new
		// 32 KiB buffer.
		BufferPool: &copyBuffers{},
		ErrorLog:   errorLog,
	}
}

type copyBuffers struct{ pool sync.Pool }

func (p *copyBuffers) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (p *copyBuffers) Put(b []byte) { p.pool.Put(&b) }

func runProxy(ctx context.Context, args []string, output io.Writer) error {
	fs := flag.NewFlagSet("sluice-load proxy", flag.ContinueOnError)
	fs.SetOutput(output)
	listen := fs.String("listen", "127.0.0.1:8081", "address to serve on")
	upstream := fs.String("upstream", "http://127.0.0.1:8080", "the application's `URL` (loopback only)")
	exitAfter := fs.Duration("exit-after", 0, "stop serving after this long; 0 serves until interrupted")
	fs.Usage = func() {
		fmt.Fprint(output, "Usage: sluice-load proxy [flags]\n\nForwards every request to the upstream through net/http's reverse proxy, deciding nothing, until interrupted.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("proxy takes no arguments, got %q", fs.Args())
	}
	target, err := url.Parse(*upstream)
	if err != nil || target.Scheme != "http" || target.Host == "" {
		return fmt.Errorf("--upstream %q: want http://HOST:PORT", *upstream)
	}
	if _, err := loopbackAddr(ctx, target); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	proxy := bareProxy(target, log.New(output, "sluice-load proxy: ", 0))
	fmt.Fprintf(output, "sluice-load proxy: forwarding http://%s to %s\n", ln.Addr(), target)
	return serve(ctx, ln, proxy, *exitAfter)
}

// serve serves handler on ln until ctx is done or exitAfter (if positive)
// has passed, then shuts down, waiting up to 5s for requests in progress.
func serve(ctx context.Context, ln net.Listener, handler http.Handler, exitAfter time.Duration) error {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
	}
	if exitAfter > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, exitAfter)
		defer cancel()
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
