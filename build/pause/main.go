// Command pause is the sandbox container of the real-node tier: the image
// containerd starts first in every pod to hold its namespaces. As the pod's
// PID 1 it reaps the orphans re-parented to it, and it exits on SIGINT or
// SIGTERM (PID 1 gets no default signal handling, so it must ask for them).
//
// make node-images builds it into the sluice-pause image, FROM scratch, so
// the node needs no pause image from a registry.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "Usage: pause\n\nThe sandbox container of a pod: it holds the pod's namespaces, reaps orphans\nand exits on SIGINT or SIGTERM. It takes no flags.")
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "pause takes no arguments, not %q\n", flag.Args())
		os.Exit(2)
	}
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap waits for every child that has exited; signals coalesce, so one
// SIGCHLD may stand for several.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
