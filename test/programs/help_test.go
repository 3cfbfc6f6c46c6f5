// Package programs checks what every program of the module does when asked
// for help, or given a flag it does not know: it says how to use it, exits
// (0 for help, non-zero for a mistake) and starts nothing. A user types
// --help to find out what a program would do before letting it do it.
package programs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// subcommands are programs whose first argument picks what they do: each
// also answers help after it.
var subcommands = map[string][]string{
	"images":      {"archives", "contexts"},
	"sluice-load": {"upstream"},
}

// mainPackages lists the module's programs: every package main, so that
// a new one is checked without being named here. hack/tools/* are modules
// of their own (the pinned tools), not the project's programs.
func mainPackages(t *testing.T, root string) []string {
	cmd := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return strings.Fields(string(out))
}

func moduleRoot(t *testing.T) string {
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = filepath.Dir(dir)
	}
}

func TestEveryProgramAnswersHelpWithoutSideEffects(t *testing.T) {
	g := NewWithT(t)
	root := moduleRoot(t)
	pkgs := mainPackages(t, root)
	g.Expect(pkgs).To(ContainElements(
		"github.com/sluice-dev/sluice/cmd/manager", "github.com/sluice-dev/sluice/cmd/enforcer", "github.com/sluice-dev/sluice/cmd/ratelimit",
		"github.com/sluice-dev/sluice/hack/demo", "github.com/sluice-dev/sluice/hack/demo-node",
		"github.com/sluice-dev/sluice/hack/node-undo"))

	bin := t.TempDir()
	build := exec.Command("go", append([]string{"build", "-o", bin + "/"}, pkgs...)...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Processes a program leaves behind are re-parented to this one rather
	// than to init, where they could not be told from others.
	if err := setChildSubreaper(); err != nil {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", err)
	}
	for _, pkg := range pkgs {
		name := filepath.Base(pkg)
		runs := [][]string{{"--help"}, {"-h"}, {"--no-such-flag"}}
		for _, sub := range subcommands[name] {
			runs = append(runs, []string{sub, "--help"}, []string{sub, "--no-such-flag"})
		}
		for _, args := range runs {
			t.Run(name+" "+strings.Join(args, " "), func(t *testing.T) {
				checkHelp(t, filepath.Join(bin, name), args)
			})
		}
	}
}

func checkHelp(t *testing.T, program string, args []string) {
	g := NewWithT(t)
	// Everything a program could write to: its working directory, home,
	// temporary and XDG directories, all empty.
	sandbox := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"work", "home", "tmp", "config", "cache", "data", "state", "runtime"} {
		dirs[d] = filepath.Join(sandbox, d)
		g.Expect(os.Mkdir(dirs[d], 0o700)).To(Succeed())
	}
	bridgeBefore := exists("/sys/class/net/sluice0")
	recordBefore := exists("/run/sluice-node/run.json")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Dir = dirs["work"]
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dirs["home"], "TMPDIR=" + dirs["tmp"],
		"XDG_CONFIG_HOME=" + dirs["config"], "XDG_CACHE_HOME=" + dirs["cache"],
		"XDG_DATA_HOME=" + dirs["data"], "XDG_STATE_HOME=" + dirs["state"], "XDG_RUNTIME_DIR=" + dirs["runtime"],
		"KUBECONFIG=" + filepath.Join(dirs["home"], "no-kubeconfig"),
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	g.Expect(ctx.Err()).NotTo(HaveOccurred(), "%s %s has not returned after 20 s: it started something; it printed:\n%s",
		program, strings.Join(args, " "), out.String())
	t.Logf("%s in %s", strings.Join(args, " "), took.Round(time.Millisecond))

	var exit *exec.ExitError
	if args[len(args)-1] == "--no-such-flag" {
		g.Expect(errors.As(err, &exit)).To(BeTrue(), "an unknown flag is an error, with a non-zero exit status; it printed:\n%s", out.String())
		g.Expect(out.String()).To(ContainSubstring("no-such-flag"), "the error names the flag")
	} else {
		g.Expect(err).NotTo(HaveOccurred(), "help exits 0; it printed:\n%s", out.String())
		g.Expect(strings.ToLower(out.String())).To(ContainSubstring("usage"))
	}

	g.Expect(leftovers()).To(BeEmpty(), "no process is left running")
	for name, d := range dirs {
		g.Expect(written(d)).To(BeEmpty(), "nothing is written to the %s directory %s", name, d)
	}
	if !bridgeBefore {
		g.Expect(exists("/sys/class/net/sluice0")).To(BeFalse(), "no bridge is made")
	}
	if !recordBefore {
		g.Expect(exists("/run/sluice-node/run.json")).To(BeFalse(), "no real-node run is recorded")
	}
}

// written lists what is under dir, but for the empty directory that
// controller-runtime's envtest makes in the user's cache directory from an
// init function, before main runs, in every program that links it (the
// demos and node-undo, through internal/testing/stack and internal/testing/node).
func written(dir string) []string {
	var found []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		if d.IsDir() && rel == "kubebuilder-envtest" && filepath.Base(dir) == "cache" {
			if entries, _ := os.ReadDir(path); len(entries) == 0 {
				return filepath.SkipDir
			}
		}
		found = append(found, rel)
		return nil
	})
	return found
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func setChildSubreaper() error {
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	return nil
}

// leftovers are this process's children still running (the programs run
// by the test have been waited for; what they started is re-parented
// here). They are killed once listed.
func leftovers() []string {
	self := strconv.Itoa(os.Getpid())
	files, _ := filepath.Glob("/proc/[0-9]*/stat")
	var found []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		fields := strings.Fields(s[i+2:])
		if len(fields) < 2 || fields[1] != self {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if fields[0] == "Z" {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		} else {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		found = append(found, s[strings.IndexByte(s, '(')+1:i]+" (pid "+strconv.Itoa(pid)+")")
	}
	return found
}
