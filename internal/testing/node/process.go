package node

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/testing/proc"
)

// process is a daemon the harness started: in a process group of its own,
// killed by the kernel if the harness's process dies (Pdeathsig), logging
// to a file in the run's directory.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

func startProcess(name, logPath string, cmd *exec.Cmd) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := proc.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process, waits up to grace and then kills its
// group. It returns once the process is reaped.
func (p *process) stop(grace time.Duration) {
	if p == nil || !p.running() {
		return
	}
	_ = syscall.Kill(p.pid(), syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.exited
	}
}

// logTail is the end of the process's log, for error messages.
func (p *process) logTail() string { return proc.Tail(p.logPath, 3000) }
