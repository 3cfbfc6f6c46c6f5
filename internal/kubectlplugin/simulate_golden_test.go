package kubectlplugin

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/simulate/*.golden")

// simulateTranscript runs kubectl sluice once per argument list, as a
// terminal shows it: each command line, then its output or its error.
func simulateTranscript(t *testing.T, runs ...[]string) string {
	t.Helper()
	var b strings.Builder
	for _, args := range runs {
		var out, errOut bytes.Buffer
		cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		err := cmd.Execute()
		fmt.Fprintf(&b, "$ kubectl sluice %s\n%s", strings.Join(args, " "), out.String())
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
	}
	return b.String()
}

// expectGolden compares out with testdata/simulate/<name>.golden.
func expectGolden(t *testing.T, name, out string) {
	t.Helper()
	path := filepath.Join("testdata", "simulate", name+".golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run with -update-golden to write it", err)
	}
	if out != string(want) {
		t.Errorf("kubectl sluice output differs from %s (-update-golden rewrites it):\n%s", path, out)
	}
}

// simulateRuns are the text, -o json and -o yaml runs of one request.
func simulateRuns(args ...string) [][]string {
	base := append([]string{"-n", "shop", "simulate"}, args...)
	return [][]string{base, append(append([]string{}, base...), "-o", "json"), append(append([]string{}, base...), "-o", "yaml")}
}

func TestSimulateGoldenConcurrency(t *testing.T) {
	f := "testdata/simulate/concurrency.yaml"
	runs := simulateRuns("-f", f, "--tenant", "acme", "--path", "/v1/exports/7")
	runs = append(runs, simulateRuns("-f", f, "--tenant", "acme", "--path", "/v1/renders/7")...)
	expectGolden(t, "concurrency", simulateTranscript(t, runs...))
}

func TestSimulateGoldenTokenBudget(t *testing.T) {
	f := "testdata/simulate/token-budget.yaml"
	runs := simulateRuns("-f", f, "--tenant", "acme", "--method", "POST", "--path", "/v1/chat/completions")
	runs = append(runs, simulateRuns("-f", f, "--tenant", "acme", "--path", "/v1/exports/7")...)
	expectGolden(t, "token-budget", simulateTranscript(t, runs...))
}

func TestSimulateGoldenLogin(t *testing.T) {
	runs := simulateRuns("-f", "testdata/simulate/login.yaml", "--tenant", "203.0.113.7", "--method", "POST", "--path", "/login")
	expectGolden(t, "login", simulateTranscript(t, runs...))
}
