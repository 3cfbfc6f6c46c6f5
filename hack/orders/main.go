// Command orders is the gRPC sample application of the e2e suite and
// `make demo`: service shop.v1.Orders (internal/example/orders) with the gRPC health
// service and server reflection, in cleartext HTTP/2 as gRPC services inside
// a cluster speak it.
//
//	go run ./hack/orders --listen 127.0.0.1:50051
//	grpcurl -plaintext -d '"book"' 127.0.0.1:50051 shop.v1.Orders/Create
//
// SIGTERM or SIGINT stops it, letting calls in flight finish for up to 5s.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/example/orders"
)

func main() {
	listen := flag.String("listen", ":50051", "address to serve gRPC on (cleartext HTTP/2)")
	pod := flag.String("pod", os.Getenv("POD_NAME"), "name sent in the x-orders-pod header of every answer (default $POD_NAME, else the host name)")
	flag.Parse()
	if *pod == "" {
		*pod, _ = os.Hostname()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen, *pod); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, listen, pod string) error {
	gs, err := orders.NewServer(&orders.Service{Pod: pod})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "orders: serving %s (health, reflection) on %s as %s\n", orders.ServiceName, ln.Addr(), pod)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		gs.Stop()
	}
	if err := <-served; err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
