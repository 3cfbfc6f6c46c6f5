// Package e2e runs the whole of Sluice on one machine (internal/testing/stack:
// kube-apiserver and etcd, Redis, sluice-manager with its webhook, and the
// injected enforcers run as processes on loopback IPs) and checks what
// users rely on: limits shared by replicas, tiers and overrides, policy
// edits rolling out with an honest status, and the system riding out the
// loss of Redis, the manager and the API server.
package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluice-dev/sluice/internal/testing/stack"
)

// sluice is the system under test, shared by every spec; each spec works
// in namespaces of its own.
var sluice *stack.Stack

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Sluice end-to-end")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	klog.SetLogger(GinkgoLogr)
	ctrllog.SetLogger(GinkgoLogr)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)

	var err error
	sluice, err = stack.Start(ctx, stack.Options{Progress: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		sluice.Close()
		Eventually(children).WithTimeout(5*time.Second).Should(BeEmpty(), "every process the suite started is stopped")
	})
}, NodeTimeout(5*time.Minute))

// On failure, the end of the logs that tell what happened.
var _ = ReportAfterEach(func(report SpecReport) {
	if !report.Failed() || sluice == nil {
		return
	}
	for _, log := range []string{sluice.Manager.LogPath(), filepath.Join(sluice.Dir, "kubelet.log")} {
		AddReportEntry(filepath.Base(log), tailOf(log, 6000))
	}
})

func tailOf(path string, n int64) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if int64(len(data)) > n {
		data = data[int64(len(data))-n:]
	}
	return string(data)
}

// children lists the processes this test binary started that still run
// (zombies excepted).
func children() []string {
	entries, err := os.ReadDir("/proc")
	Expect(err).NotTo(HaveOccurred())
	var out []string
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 || fields[0] == "Z" || fields[1] != strconv.Itoa(self) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
	}
	return out
}
