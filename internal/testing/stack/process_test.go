package stack

import (
	"bufio"
	"fmt"
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

// helperEnv makes the test binary play a stack that dies without cleaning up.
const helperEnv = "SLUICE_STACK_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "crash" {
		crashingStack()
		return
	}
	os.Exit(m.Run())
}

// crashingStack starts a process the way envtest starts the control plane
// (own group, no Pdeathsig) and one the way the stack starts its own, hands
// the first to a reaper, prints both pids, and waits to be killed.
func crashingStack() {
	r, err := startReaper()
	if err != nil {
		panic(err)
	}
	plain := exec.Command("sleep", "300")
	plain.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := plain.Start(); err != nil {
		panic(err)
	}
	r.watch(plain.Process.Pid)
	own, err := startProcess("sleep", os.DevNull, exec.Command("sleep", "300"))
	if err != nil {
		panic(err)
	}
	fmt.Println(plain.Process.Pid, own.Pid())
	time.Sleep(time.Minute)
}

// A stack that is killed (a test binary timing out, kill -9) takes every
// process it started with it.
func TestProcessesDieWithTheStack(t *testing.T) {
	g := NewWithT(t)
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"=crash")
	out, err := helper.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(helper.Start()).To(Succeed())
	defer func() { _ = helper.Process.Kill() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	var pids []int
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		g.Expect(err).NotTo(HaveOccurred())
		pids = append(pids, pid)
	}
	g.Expect(pids).To(HaveLen(2))
	for _, pid := range pids {
		g.Expect(running(pid)).To(BeTrue())
	}

	g.Expect(helper.Process.Kill()).To(Succeed())
	_ = helper.Wait()
	for _, pid := range pids {
		g.Eventually(func() bool { return running(pid) }).WithTimeout(5*time.Second).WithPolling(20*time.Millisecond).
			Should(BeFalse(), "process %d outlived the stack", pid)
	}
}

func TestStopEndsTheProcessGroup(t *testing.T) {
	g := NewWithT(t)
	// A shell that ignores SIGTERM and has a child: Stop must still end both.
	p, err := startProcess("sh", filepath.Join(t.TempDir(), "sh.log"),
		exec.Command("sh", "-c", "trap '' TERM; sleep 300 & echo $!; wait"))
	g.Expect(err).NotTo(HaveOccurred())
	var child int
	g.Eventually(func() error {
		_, err := fmt.Sscan(p.LogTail(100), &child)
		return err
	}).Should(Succeed())
	start := time.Now()
	p.Stop(200 * time.Millisecond)
	g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
	g.Expect(p.Running()).To(BeFalse())
	g.Eventually(func() bool { return running(child) }).WithTimeout(2 * time.Second).Should(BeFalse())
}
