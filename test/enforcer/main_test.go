// Package enforcer tests the sluice-enforcer binary end to end: the test
// builds it, runs it as a process in front of a real upstream (httptest)
// with a real Redis (internal/testing/redistest), and talks to it over HTTP as
// clients and the operator do. Every address is on 127.0.0.1.
package enforcer

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

var (
	// binary is the sluice-enforcer built for this run.
	binary string
	// shared is the Redis most tests use; each test has a namespace of its
	// own, so their buckets never meet.
	shared *redistest.Server
)

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sluice-enforcer-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// sluice-policy-compile beside it, as in the image: --policy-file runs it.
	binary = filepath.Join(dir, "sluice-enforcer")
	compiler := filepath.Join(dir, "sluice-policy-compile")
	for _, b := range []struct{ out, pkg string }{
		{binary, "github.com/sluice-dev/sluice/cmd/enforcer"},
		{compiler, "github.com/sluice-dev/sluice/cmd/policy-compile"},
	} {
		args := []string{"build", "-o", b.out, b.pkg}
		if raceEnabled && b.out == binary {
			args = []string{"build", "-race", "-o", b.out, b.pkg}
		}
		build := exec.Command("go", args...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", filepath.Base(b.out), err)
			return 1
		}
	}
	if shared, err = redistest.New(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer shared.Close()
	return m.Run()
}
