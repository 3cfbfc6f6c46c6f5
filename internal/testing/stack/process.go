package stack

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/testing/proc"
)

// Process is a child process of the stack: in a process group of its own
// (so the terminal's Ctrl-C reaches the stack, which then stops it in
// order), killed with SIGKILL if the stack's process dies (Pdeathsig), and
// logging to a file.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}

	mu      sync.Mutex
	exitErr error
}

// StartProcess starts cmd as a Process of the stack, with its output
// appended to logPath: for the programs a test runs beside the stack.
func StartProcess(name, logPath string, cmd *exec.Cmd) (*Process, error) {
	return startProcess(name, logPath, cmd)
}

// startProcess starts cmd with its output appended to logPath.
func startProcess(name, logPath string, cmd *exec.Cmd) (*Process, error) {
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
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has ended and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Running reports whether the process has not ended yet.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// ExitErr is how the process ended; nil while it runs or after exit 0.
func (p *Process) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// Stop sends SIGTERM to the process group, waits up to grace for the
// process to end, then kills the group. It returns once the process is
// reaped and can be called more than once.
func (p *Process) Stop(grace time.Duration) {
	if !p.Running() {
		return
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.Kill()
	}
	// Helpers the process started in its group go with it.
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
}

// Kill ends the process group with SIGKILL, as in a crash, and waits until
// the process is reaped.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.exited
}

// Signal sends sig to the process only.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(p.Pid(), sig)
}

// LogTail is the last n bytes of the process's log, for error messages.
func (p *Process) LogTail(n int64) string {
	return proc.Tail(p.LogPath, n)
}

// reaper kills process groups that the stack cannot give Pdeathsig (etcd
// and kube-apiserver, which envtest starts) if the stack's process dies
// before stopping them: a shell that reads process group ids from a pipe
// and, when the pipe closes because its writer is gone, kills them all. A
// clean shutdown stops everything itself and then disarms the reaper.
type reaper struct {
	cmd *exec.Cmd
	w   *os.File
	mu  sync.Mutex
}

const reaperScript = `pgids=""
while read -r pgid; do
  [ "$pgid" = disarm ] && exit 0
  pgids="$pgids -$pgid"
done
[ -n "$pgids" ] && kill -KILL $pgids 2>/dev/null
exit 0`

func startReaper() (*reaper, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", reaperScript)
	cmd.Stdin = r
	// Its own group, so the terminal's Ctrl-C does not end it before the
	// stack has stopped; no Pdeathsig, since outliving the stack is its job.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("start the process reaper: %w", err)
	}
	_ = r.Close()
	go func() { _ = cmd.Wait() }()
	return &reaper{cmd: cmd, w: w}, nil
}

// watch registers the process group of pid.
func (r *reaper) watch(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil {
		_, _ = fmt.Fprintln(r.w, pid)
	}
}

// disarm ends the reaper without killing anything.
func (r *reaper) disarm() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		return
	}
	_, _ = fmt.Fprintln(r.w, "disarm")
	_ = r.w.Close()
	r.w = nil
}
