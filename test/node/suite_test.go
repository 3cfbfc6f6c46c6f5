//go:build node

// Package node runs the real-node tier: a real kubelet, containerd and
// kube-proxy on this machine with the rest of a control plane
// (internal/testing/node), pods from images imported into containerd. It needs
// root and changes the host while it runs (iptables, cgroups, sysctls, a
// bridge); the suite checks that the host is as it found it afterwards.
//
//	hack/envtest.sh && hack/envtest.sh node
//	go test -tags node ./test/node/ -v
package node

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluice-dev/sluice/internal/testing/node"
)

// cluster is the node every spec runs on; each spec works in namespaces
// of its own.
var cluster *node.Cluster

// root is the module's checkout.
var root = filepath.Join("..", "..")

func TestNode(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Sluice on a real node")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	klog.SetLogger(GinkgoLogr)
	ctrllog.SetLogger(GinkgoLogr)
	SetDefaultEventuallyTimeout(90 * time.Second)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	if os.Geteuid() != 0 {
		Skip("the real-node suite needs root")
	}

	before, err := node.Snapshot()
	Expect(err).NotTo(HaveOccurred())
	root, err = filepath.Abs(root)
	Expect(err).NotTo(HaveOccurred())
	cluster, err = node.Start(ctx, node.Options{
		Root:     root,
		Progress: GinkgoWriter,
	})
	Expect(err).NotTo(HaveOccurred())
	for _, t := range cluster.Timings {
		GinkgoWriter.Printf("start: %-45s %s\n", t.Step, t.Duration.Round(100*time.Millisecond))
	}
	DeferCleanup(func() {
		pids := cluster.Pids()
		Expect(cluster.Close()).To(Succeed())
		for _, pid := range pids {
			Expect(alive(pid)).To(BeFalse(), "process %d the harness started has stopped", pid)
		}
		after, err := node.Snapshot()
		Expect(err).NotTo(HaveOccurred())
		Expect(after.Diff(before)).To(BeEmpty(), "the host is as the suite found it")
		_, err = os.Stat(cluster.Dir)
		Expect(os.IsNotExist(err)).To(BeTrue(), "the run's directory %s is removed", cluster.Dir)
	})
}, NodeTimeout(8*time.Minute))

// On failure, the end of the daemons' logs.
var _ = ReportAfterEach(func(report SpecReport) {
	if !report.Failed() || cluster == nil {
		return
	}
	for _, name := range []string{"kubelet", "containerd", "kube-proxy", "kube-controller-manager", "kube-scheduler"} {
		AddReportEntry(name+".log", tailOf(cluster.LogPath(name), 4000))
	}
	// The pods' logs (the manager's, the enforcers'), as kubectl logs reads them.
	logs, _ := filepath.Glob(filepath.Join(cluster.Dir, "kubelet", "pod-logs", "*", "*", "*.log"))
	for _, l := range logs {
		AddReportEntry(strings.TrimPrefix(l, filepath.Join(cluster.Dir, "kubelet", "pod-logs")+"/"), tailOf(l, 2000))
	}
})

func tailOf(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

// alive reports whether pid is a process that has not exited.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ')' {
			return i+2 < len(s) && s[i+2] != 'Z'
		}
	}
	return true
}
