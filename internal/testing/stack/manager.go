package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
)

// managerStartTimeout bounds the wait for a new manager to be ready.
const managerStartTimeout = time.Minute

// Manager is the sluice-manager process. Tests stop, kill and restart it.
type Manager struct {
	bin, logPath string
	args         []string
	probeAddr    string
	metricsAddr  string

	mu   sync.Mutex
	proc *Process
}

// newManager is the manager to run with args; its health probes and its
// metrics get free ports other than taken (the webhook's, which nothing
// listens on yet).
func newManager(bin, dir string, args []string, taken int) (*Manager, error) {
	ports, err := freeport.Loopback(3) // distinct: two of them are not taken
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, p := range ports {
		if p != taken {
			addrs = append(addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		}
	}
	probe, metrics := addrs[0], addrs[1]
	return &Manager{
		bin: bin, logPath: filepath.Join(dir, "sluice-manager.log"), probeAddr: probe, metricsAddr: metrics,
		args: append([]string{"--health-probe-bind-address=" + probe, "--metrics-bind-address=" + metrics}, args...),
	}, nil
}

// MetricsAddr is where the manager serves Prometheus /metrics (host:port).
func (m *Manager) MetricsAddr() string { return m.metricsAddr }

// Args is the manager's command line, without the binary.
func (m *Manager) Args() []string { return append([]string(nil), m.args...) }

// LogPath is the manager's log file.
func (m *Manager) LogPath() string { return m.logPath }

// Start starts the manager and waits until it reports ready (its webhook
// serves, its caches synced).
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil && m.proc.Running() {
		return errors.New("sluice-manager is running")
	}
	p, err := startProcess("sluice-manager", m.logPath, exec.Command(m.bin, m.args...))
	if err != nil {
		return err
	}
	m.proc = p
	ctx, cancel := context.WithTimeout(ctx, managerStartTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		if resp, err := client.Get("http://" + m.probeAddr + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("sluice-manager exited at start (%w); its log ends with:\n%s", p.ExitErr(), p.LogTail(3000))
		case <-ctx.Done():
			return fmt.Errorf("sluice-manager not ready within %s; its log ends with:\n%s", managerStartTimeout, p.LogTail(3000))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops the manager as Kubernetes would (SIGTERM, then SIGKILL after
// 10s); Kill kills it at once, as a crashing node would.
func (m *Manager) Stop() { m.end(func(p *Process) { p.Stop(10 * time.Second) }) }

// Kill ends the manager with SIGKILL.
func (m *Manager) Kill() { m.end((*Process).Kill) }

func (m *Manager) end(how func(*Process)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil {
		how(m.proc)
	}
}

// Running reports whether the manager process runs.
func (m *Manager) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil && m.proc.Running()
}

// Restart stops the manager and starts a new one.
func (m *Manager) Restart(ctx context.Context) error {
	m.Stop()
	return m.Start(ctx)
}
