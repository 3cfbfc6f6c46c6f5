// Command node-undo returns the host to its state before a real-node run
// (internal/testing/node) that was killed before it could stop: it stops the
// processes the run started, unmounts, removes its cgroups, iptables
// chains and bridge, and restores the sysctls, from the record the run
// keeps in /run/sluice-node. The next run does the same at its start. It
// refuses while a run is in progress (that run restores the host itself
// when it ends), naming it.
//
//	sudo go run ./hack/node-undo
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/sluice-dev/sluice/internal/testing/node"
)

func main() {
	fs := flag.NewFlagSet("node-undo", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: node-undo (make node-undo, as root)

Undoes what a killed real-node run (make demo-node, make test-node) left on
this host: its processes, mounts, cgroups, iptables chains, bridge and
sysctls, from the record in /run/sluice-node. It takes no flags.
`)
	}
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "node-undo takes no arguments, not %q\n", fs.Args())
		fs.Usage()
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "node-undo changes what a real-node run left (mounts, iptables, cgroups) and needs root: sudo make node-undo")
		os.Exit(1)
	}
	undone, err := node.UndoStale()
	if err != nil {
		fmt.Fprintln(os.Stderr, "node-undo:", err)
		os.Exit(1)
	}
	if undone {
		fmt.Println("undid the previous real-node run")
	} else {
		fmt.Println("no real-node run to undo")
	}
}
