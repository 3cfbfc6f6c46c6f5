package main

import (
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

// As a pod's PID 1, pause reaps what is re-parented to it: a process left
// behind by a container of the pod never stays a zombie. SIGTERM ends it.
func TestReapsOrphansAsPID1(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("nsenter is not installed")
	}
	g := NewWithT(t)
	bin := filepath.Join(t.TempDir(), "pause")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)

	pause := exec.Command(bin)
	pause.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	g.Expect(pause.Start()).To(Succeed())
	defer func() { _ = pause.Process.Kill() }()
	time.Sleep(200 * time.Millisecond) // let it install its signal handlers

	// A shell in the pod's PID namespace leaves a sleep behind: pause is
	// its parent from then on.
	orphan := exec.Command("nsenter", "--target", strconv.Itoa(pause.Process.Pid), "--pid", "--",
		"sh", "-c", "sleep 0.5 </dev/null >/dev/null 2>&1 & exit 0")
	out, err = orphan.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	g.Eventually(func() []string { return children(pause.Process.Pid) }).Should(ContainElement(HavePrefix("sleep ")))
	g.Eventually(func() []string { return children(pause.Process.Pid) }, 3*time.Second).Should(BeEmpty(),
		"the orphan exited and was reaped, not left a zombie")

	g.Expect(pause.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Expect(pause.Wait()).To(Succeed())
}

// children lists "NAME STATE" for each process whose parent is pid.
func children(pid int) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*/status")
	var found []string
	for _, file := range dirs {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		fields := map[string]string{}
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				fields[k] = strings.TrimSpace(v)
			}
		}
		if fields["PPid"] == strconv.Itoa(pid) {
			found = append(found, fields["Name"]+" "+fields["State"])
		}
	}
	return found
}
