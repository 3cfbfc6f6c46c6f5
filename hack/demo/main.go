// Command demo runs Sluice on this machine and shows it at work: `make
// demo`. It starts etcd and kube-apiserver, Redis and sluice-manager with
// its injection webhook (internal/testing/stack), applies the sample policies of
// config/samples, creates two replicas of each sample application, and
// drives traffic through the injected enforcers: limits per tenant, a
// policy edit rolling out, Redis going away, and gRPC calls to the gRPC
// sample application.
//
//	go run ./hack/demo [--keep]
//
// With --keep (make demo KEEP=1) everything stays up for kubectl and curl
// until Ctrl-C. Every process stops when the demo ends, however it ends.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluice-dev/sluice/internal/testing/stack"
)

// namespace is where the demo applies everything.
const namespace = "demo"

func main() {
	keep := flag.Bool("keep", false, "keep everything running after the demo, until Ctrl-C")
	flag.Parse()
	// The stack's clients log through klog and controller-runtime; the
	// demo tells its own story, and the logs are in the stack's directory.
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *keep); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			fmt.Println("\ninterrupted: everything is stopped")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "\ndemo failed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, keep bool) error {
	start := time.Now()
	fmt.Println("Sluice on this machine: etcd and kube-apiserver, Redis, sluice-manager with its")
	fmt.Println("injection webhook, and the enforcer sidecars of the pods, run by a stand-in kubelet.")
	fmt.Println()
	s, err := stack.Start(ctx, stack.Options{Progress: progress{}, PodNetwork: [3]byte{127, 0, 0}})
	if err != nil {
		return err
	}
	defer func() {
		s.Close()
		fmt.Println("everything is stopped")
	}()
	fmt.Printf("  · up in %s; logs, kubeconfig and pod volumes are in %s\n", time.Since(start).Round(100*time.Millisecond), s.Dir)

	d := &demo{s: s}
	steps := []func(context.Context) error{d.deploy, d.traffic, d.raiseLimit, d.stopRedis, d.startRedis, d.grpcCalls}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	fmt.Printf("\nThe demo took %s.\n", time.Since(start).Round(time.Second))
	if keep {
		d.keep(ctx)
	}
	return nil
}

// progress prints the stack's slow steps.
type progress struct{}

func (progress) Write(p []byte) (int, error) {
	fmt.Printf("  · %s", p)
	return len(p), nil
}
