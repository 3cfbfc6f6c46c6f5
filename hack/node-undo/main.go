// Command node-undo returns the host to its state before a real-node run
// (internal/node) that was killed before it could stop: it stops the
// processes the run started, unmounts, removes its cgroups, iptables
// chains and bridge, and restores the sysctls, from the record the run
// keeps in /run/sluice-node. The next run does the same at its start.
//
//	sudo go run ./hack/node-undo
package main

import (
	"fmt"
	"os"

	"github.com/sluice-dev/sluice/internal/node"
)

func main() {
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
