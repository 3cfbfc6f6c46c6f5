package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sluice-dev/sluice/internal/testing/proc"
)

// controlPlane is etcd and kube-apiserver, started by envtest, with the
// CRDs and the injection webhook configuration installed, and an admin
// user's kubeconfig on disk.
type controlPlane struct {
	env        *envtest.Environment
	config     *rest.Config
	kubeconfig string
	dir        string

	mu sync.Mutex
	// apiserverArgs is the stopped kube-apiserver's command line, nil
	// while it runs; restarted is the process StartAPIServer started.
	apiserverArgs []string
	restarted     *Process
}

func startControlPlane(root, assets, dir string, withWebhook bool, reap *reaper) (*controlPlane, error) {
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	if withWebhook {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook")}}
	}
	// envtest starts etcd and kube-apiserver without Pdeathsig and does not
	// tell their pids: hand each to the reaper as soon as it appears, so
	// that they die with us even if we die while envtest waits for them.
	watching := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		seen := map[int]bool{}
		scan := func() {
			for _, name := range []string{"etcd", "kube-apiserver"} {
				pids, _ := proc.ChildPids(name)
				for _, pid := range pids {
					if !seen[pid] {
						seen[pid] = true
						reap.watch(pid)
					}
				}
			}
		}
		for {
			scan()
			select {
			case <-watching:
				scan()
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	cfg, err := env.Start()
	close(watching)
	<-done
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("start etcd and kube-apiserver from %s (make envtest builds them): %w", assets, err)
	}
	cp := &controlPlane{env: env, dir: dir}
	admin, err := env.AddUser(envtest.User{Name: "sluice-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		cp.stop()
		return nil, err
	}
	data, err := admin.KubeConfig()
	if err != nil {
		cp.stop()
		return nil, err
	}
	cp.config = admin.Config()
	cp.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(cp.kubeconfig, data, 0o600); err != nil {
		cp.stop()
		return nil, err
	}
	return cp, nil
}

// webhook is where the manager must serve the injection webhook for the
// API server to reach it.
func (cp *controlPlane) webhook() (port int, certDir string) {
	o := cp.env.WebhookInstallOptions
	return o.LocalServingPort, o.LocalServingCertDir
}

// StopAPIServer stops kube-apiserver (SIGTERM, as a crash of the control
// plane or an upgrade would): every client of the API then fails until
// StartAPIServer. etcd keeps the cluster's state.
func (cp *controlPlane) StopAPIServer() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.apiserverArgs != nil {
		return errors.New("kube-apiserver is already stopped")
	}
	if cp.restarted != nil {
		cp.apiserverArgs = cp.restarted.cmd.Args
		cp.restarted.Stop(5 * time.Second)
		cp.restarted = nil
		return nil
	}
	pids, err := proc.ChildPids("kube-apiserver")
	if err != nil {
		return fmt.Errorf("find the kube-apiserver process: %w", err)
	}
	if len(pids) != 1 {
		return fmt.Errorf("found %d kube-apiserver processes, want 1", len(pids))
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pids[0]))
	if err != nil {
		return err
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	// A graceful stop waits for open watches; a crash does not. Either way
	// the API is gone, so SIGKILL after a short grace period.
	if err := syscall.Kill(pids[0], syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for running(pids[0]) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pids[0], syscall.SIGKILL)
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			return errors.New("kube-apiserver does not stop, even on SIGKILL")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cp.apiserverArgs = args
	return nil
}

// StartAPIServer starts kube-apiserver again, with the command line,
// certificates and port it had, and waits until it serves.
func (cp *controlPlane) StartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.apiserverArgs == nil {
		return errors.New("kube-apiserver is running")
	}
	cmd := exec.Command(cp.apiserverArgs[0], cp.apiserverArgs[1:]...)
	p, err := startProcess("kube-apiserver", filepath.Join(cp.dir, "kube-apiserver.log"), cmd)
	if err != nil {
		return err
	}
	cp.restarted, cp.apiserverArgs = p, nil
	dc, err := discovery.NewDiscoveryClientForConfig(cp.config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if _, err := dc.ServerVersion(); err == nil {
			return nil
		}
		if !p.Running() {
			return fmt.Errorf("kube-apiserver exited: %s", p.LogTail(2000))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver does not serve again: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// running reports whether pid is a process that has not exited (a zombie
// has: envtest reaps it).
func running(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

func (cp *controlPlane) stop() {
	cp.mu.Lock()
	if cp.restarted != nil {
		cp.restarted.Stop(30 * time.Second)
		cp.restarted = nil
	}
	cp.mu.Unlock()
	_ = cp.env.Stop()
}
