package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// upstreamHandler answers every request with the same small 200 response:
// the fixed, cheap application a proxy benchmark puts behind the proxy.
func upstreamHandler(body []byte) http.Handler {
	length := []string{strconv.Itoa(len(body))}
	contentType := []string{"text/plain; charset=utf-8"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read what a client sent so the connection stays reusable.
		_, _ = io.Copy(io.Discard, r.Body)
		h := w.Header()
		h["Content-Type"] = contentType
		h["Content-Length"] = length
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	})
}

func runUpstream(ctx context.Context, args []string, output io.Writer) error {
	fs := flag.NewFlagSet("sluice-load upstream", flag.ContinueOnError)
	fs.SetOutput(output)
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve on")
	bodySize := fs.Int("body-size", 3, "bytes in each response body")
	exitAfter := fs.Duration("exit-after", 0, "stop serving after this long; 0 serves until interrupted")
	fs.Usage = func() {
		fmt.Fprint(output, "Usage: sluice-load upstream [flags]\n\nServes a small 200 response to every request until interrupted.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("upstream takes no arguments, got %q", fs.Args())
	}
	if *bodySize < 0 || *bodySize > 1<<20 {
		return fmt.Errorf("--body-size must be between 0 and 1048576, got %d", *bodySize)
	}
	body := []byte(strings.Repeat("ok\n", *bodySize/3+1)[:*bodySize])

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Fprintf(output, "sluice-load upstream: serving %d-byte responses on http://%s\n", len(body), ln.Addr())
	return serve(ctx, ln, upstreamHandler(body), *exitAfter)
}
