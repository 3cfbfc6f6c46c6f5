// Command echo is the HTTP sample application of the real-node tier, the
// process form of the stand-in kubelet's in-process application
// (internal/testing/stack): every request is answered 200 with a JSON echo naming
// the pod, so a test can tell which replica served it.
//
//	go run ./hack/echo --listen 127.0.0.1:8080
//	curl -H 'X-Tenant-ID: acme' 127.0.0.1:8080/v1/things
//
// SIGTERM or SIGINT stops it, letting requests in flight finish for up to 5s.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// echo is the answer to every request.
type echo struct {
	Pod    string `json:"pod"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Tenant string `json:"tenant,omitempty"`
	Plan   string `json:"plan,omitempty"`
}

func main() {
	listen := flag.String("listen", ":8080", "address to serve HTTP on")
	pod := flag.String("pod", os.Getenv("POD_NAME"), "name sent in every answer (default $POD_NAME, else the host name)")
	flag.Parse()
	if *pod == "" {
		*pod, _ = os.Hostname()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen, *pod); err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, listen, pod string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler(pod), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "echo: serving HTTP on %s as %s\n", ln.Addr(), pod)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func handler(pod string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echo{
			Pod: pod, Method: r.Method, Path: r.URL.Path,
			Tenant: r.Header.Get("X-Tenant-ID"), Plan: r.Header.Get("X-Plan"),
		})
	})
}
