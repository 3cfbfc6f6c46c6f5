package envtestutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Kubectl is the kubectl binary the suites run: the one hack/envtest.sh
// linked next to the control plane's binaries in assets, else the one on
// PATH. Without either it is an error, not a skip: make test must not pass
// having left out the kubectl checks.
func Kubectl(assets string) (string, error) {
	bin := filepath.Join(assets, "kubectl")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		return "", fmt.Errorf("kubectl is neither in %s nor on PATH: install it (hack/envtest.sh links it next to etcd)", assets)
	}
	return bin, nil
}
