package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/program"
)

var (
	buildCompiler sync.Once
	compilerDir   string
	compilerErr   error
)

// withCompiler builds sluice-policy-compile once and puts it on PATH for
// the test: the test binary's directory does not hold it.
func withCompiler(t *testing.T) {
	buildCompiler.Do(func() {
		compilerDir, compilerErr = os.MkdirTemp("", "sluice-policy-compile-")
		if compilerErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(compilerDir, compilerName), "github.com/sluice-dev/sluice/cmd/policy-compile").CombinedOutput()
		if err != nil {
			compilerErr = fmt.Errorf("go build ./cmd/policy-compile: %w\n%s", err, out)
		}
	})
	if compilerErr != nil {
		t.Fatal(compilerErr)
	}
	t.Setenv("PATH", compilerDir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func TestMain(m *testing.M) {
	status := m.Run()
	if compilerDir != "" {
		_ = os.RemoveAll(compilerDir)
	}
	os.Exit(status)
}

// Without sluice-policy-compile beside it or on PATH, --policy-file does not
// start, and says where it looked.
func TestPolicyFileNeedsTheCompiler(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("PATH", t.TempDir())
	path := filepath.Join(t.TempDir(), "policies.yaml")
	g.Expect(os.WriteFile(path, []byte("kind: RateLimitPolicy\n"), 0o644)).To(Succeed())
	exe, err := os.Executable()
	g.Expect(err).NotTo(HaveOccurred())
	var stderr bytes.Buffer
	status := run(context.Background(), []string{"--upstream", "http://127.0.0.1:1", "--policy-file", path,
		"--listen", freeAddr(t), "--admin-listen", freeAddr(t), "--debug-listen", ""}, env(nil), &bytes.Buffer{}, &stderr)
	g.Expect(status).To(Equal(program.ExitConfig), stderr.String())
	g.Expect(stderr.String()).To(Equal("sluice-enforcer: invalid configuration: --policy-file needs sluice-policy-compile, which is neither in " +
		filepath.Dir(exe) + " nor on PATH: build it beside sluice-enforcer (make build, or go build ./cmd/policy-compile)\n"))
}

// A policy the compiler refuses does not start the enforcer; the refusal is
// the compiler's, as it words it.
func TestPolicyFileRefusedAtStart(t *testing.T) {
	g := NewWithT(t)
	withCompiler(t)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	g.Expect(os.WriteFile(path, []byte(`apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: login}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  rules: [{name: login, limits: [{requests: 5, period: 1d}]}]
`), 0o644)).To(Succeed())
	var stderr bytes.Buffer
	status := run(context.Background(), []string{"--upstream", "http://127.0.0.1:1", "--policy-file", path,
		"--listen", freeAddr(t), "--admin-listen", freeAddr(t), "--debug-listen", ""}, env(nil), &bytes.Buffer{}, &stderr)
	g.Expect(status).To(Equal(program.ExitConfig), stderr.String())
	g.Expect(stderr.String()).To(HavePrefix("sluice-enforcer: invalid configuration: load policies: " + path + ` document 1: RateLimitPolicy "login" is invalid:`))
	g.Expect(stderr.String()).To(ContainSubstring(`spec.rules[0].limits[0].period: Invalid value: "1d": period must be a duration such as 30s, 1m, 1h or 24h; there is no day unit`))
}
