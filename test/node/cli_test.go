//go:build node

package node

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The user's tools: the kubectl of make envtest and the helm of the
// Makefile's pinned tools, both talking to the node as cluster-admin.
func kubectlPath() string { return filepath.Join(root, "bin", "k8s", "kubectl") }
func helmPath() string    { return filepath.Join(root, "bin", "helm") }

// userEnv is a shell's environment for the node: KUBECONFIG, and helm's
// cache, config and data in the run's directory rather than root's home.
func userEnv() []string {
	helmHome := filepath.Join(cluster.Dir, "helm")
	return append(os.Environ(),
		"KUBECONFIG="+cluster.Kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(helmHome, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME="+filepath.Join(helmHome, "data"),
		"PATH="+filepath.Dir(kubectlPath())+":"+filepath.Dir(helmPath())+":"+os.Getenv("PATH"),
	)
}

// run runs a command line as a user would in the checkout, and returns its
// output; a failure fails the spec with what it printed.
func run(ctx context.Context, name string, args ...string) string {
	out, err := tryRun(ctx, name, args...)
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "%s %s:\n%s", name, strings.Join(args, " "), out)
	return out
}

// tryRun is run that returns the error.
func tryRun(ctx context.Context, name string, args ...string) (string, error) {
	switch name {
	case "kubectl":
		name = kubectlPath()
	case "helm":
		name = helmPath()
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	cmd.Env = userEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	GinkgoWriter.Printf("$ %s %s\n%s", filepath.Base(name), strings.Join(args, " "), out.String())
	return out.String(), err
}

func kubectl(ctx context.Context, args ...string) string { return run(ctx, "kubectl", args...) }
func helm(ctx context.Context, args ...string) string    { return run(ctx, "helm", args...) }
