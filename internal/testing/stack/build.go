package stack

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// buildBinaries builds sluice-manager, sluice-enforcer and the gRPC sample
// application (hack/orders) into dir with one go build, so they share its
// cache and its work.
func buildBinaries(root, dir string, progress io.Writer) (manager, enforcer, orders string, err error) {
	start := time.Now()
	fmt.Fprintln(progress, "building sluice-manager and sluice-enforcer (the first build takes a minute or two)")
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/manager", "./cmd/enforcer", "./hack/orders")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", "", fmt.Errorf("go build ./cmd/manager ./cmd/enforcer ./hack/orders: %w\n%s", err, out)
	}
	// go build -o DIR/ names each binary after its directory; the processes
	// carry the names the docs and images use.
	manager, enforcer = filepath.Join(dir, "sluice-manager"), filepath.Join(dir, "sluice-enforcer")
	if err := os.Rename(filepath.Join(dir, "manager"), manager); err != nil {
		return "", "", "", err
	}
	if err := os.Rename(filepath.Join(dir, "enforcer"), enforcer); err != nil {
		return "", "", "", err
	}
	fmt.Fprintf(progress, "built in %s\n", time.Since(start).Round(100*time.Millisecond))
	return manager, enforcer, filepath.Join(dir, "orders"), nil
}
