// Command kubectl-sluice is the kubectl plugin of Sluice: kubectl sluice
// status, explain, simulate, tenant, top, unban and reset
// (docs/kubectl-kubectlplugin.md).
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/sluice-dev/sluice/internal/kubectlplugin"
)

func main() {
	cmd := kubectlplugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
