//go:build node

package node

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// While this suite's node runs, it holds the host-wide lock: another
// real-node run must not touch the host, and must say whose run it waits
// for.
var _ = Describe("A second real-node run while the suite's node runs", func() {
	holder := fmt.Sprintf(`pid %d \(%s`, os.Getpid(), regexp.QuoteMeta(os.Args[0]))
	var record []byte

	BeforeEach(func() {
		var err error
		record, err = os.ReadFile("/run/sluice-node/run.json")
		Expect(err).NotTo(HaveOccurred())
	})

	// runDirs are the real-node runs' directories in the temporary directory.
	runDirs := func() []string {
		dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "sluice-node-*"))
		return dirs
	}

	It("make demo-node waits, naming this run, changes nothing, and stops on SIGTERM", func() {
		bin := buildProgram(Default, GinkgoT().TempDir(), "./hack/demo-node")
		dirs := runDirs()
		demo := exec.Command(bin)
		demo.Dir = root
		pr, pw, err := os.Pipe()
		Expect(err).NotTo(HaveOccurred())
		demo.Stdout, demo.Stderr = pw, pw
		Expect(demo.Start()).To(Succeed())
		_ = pw.Close()
		out := readLines(pr)
		exited := make(chan error, 1)
		go func() { exited <- demo.Wait() }()
		DeferCleanup(func() { _ = demo.Process.Kill() })

		waiting := regexp.MustCompile(`^  · waiting for the real-node run of ` + holder + `.*\) to end: one run at a time on this host \(/run/sluice-node/lock\); Ctrl-C gives up$`)
		Eventually(func() string { return out.line(waiting) }).WithTimeout(30*time.Second).ShouldNot(BeEmpty(),
			"it says whom it waits for")
		Consistently(func() []string { return runDirs() }).WithTimeout(2*time.Second).Should(Equal(dirs), "it makes no run directory")
		Expect(os.ReadFile("/run/sluice-node/run.json")).To(Equal(record), "it leaves this run's record alone")
		Expect(out.String()).NotTo(ContainSubstring("making the pods' bridge"))

		Expect(demo.Process.Signal(syscall.SIGTERM)).To(Succeed())
		var err2 error
		Eventually(exited).WithTimeout(10 * time.Second).Should(Receive(&err2))
		var exit *exec.ExitError
		Expect(errors.As(err2, &exit)).To(BeTrue())
		Expect(exit.ExitCode()).To(Equal(130))
		<-out.done
		Expect(out.String()).To(HaveSuffix("interrupted before the node started: nothing on the host was changed"))
		Expect(os.ReadFile("/run/sluice-node/run.json")).To(Equal(record))
	})

	It("make node-undo refuses in one line naming this run, and undoes nothing", func(ctx SpecContext) {
		bin := buildProgram(Default, GinkgoT().TempDir(), "./hack/node-undo")
		undo := exec.CommandContext(ctx, bin)
		undo.Dir = root
		out, err := undo.CombinedOutput()
		var exit *exec.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), "it fails: %s", out)
		Expect(string(out)).To(MatchRegexp(`^node-undo: another real-node run holds /run/sluice-node/lock: ` + holder + `.*\); stop it \(it restores the host as it ends\) or wait for it\n$`))
		Expect(os.ReadFile("/run/sluice-node/run.json")).To(Equal(record))
		Expect(kubectl(ctx, "get", "nodes")).To(MatchRegexp(`\sReady\s`), "the node still runs")
	})
})
