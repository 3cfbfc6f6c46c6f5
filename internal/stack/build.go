package stack

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// modulePath is the module the stack runs the binaries of.
const modulePath = "github.com/sluice-dev/sluice"

// findRoot walks up from the working directory to the module's root.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			line, _ := bufio.NewReader(f).ReadString('\n')
			_ = f.Close()
			if strings.TrimSpace(line) == "module "+modulePath {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the " + modulePath + " module: run from its checkout or set Options.Root")
		}
		dir = parent
	}
}

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
