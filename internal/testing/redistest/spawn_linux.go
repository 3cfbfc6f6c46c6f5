package redistest

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// On Linux every redis-server gets Pdeathsig SIGKILL, so it dies with the
// test binary however the binary ends (panic, -timeout, kill -9) and no
// server outlives a test run.
//
// Pdeathsig fires when the OS thread that forked the child exits, not the
// process. Go may end a thread while the process runs on (a goroutine that
// exits while locked to its thread takes the thread with it), which would
// kill a server in the middle of a test. So all servers are forked from one
// goroutine that locks its thread and never returns: that thread lives
// exactly as long as the process.

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce     sync.Once
	spawnRequests chan spawnRequest
)

func startProcess(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		go spawner()
	})
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	req := spawnRequest{cmd: cmd, done: make(chan error, 1)}
	spawnRequests <- req
	return <-req.done
}

func spawner() {
	runtime.LockOSThread() // never unlocked; see above
	for req := range spawnRequests {
		req.done <- req.cmd.Start()
	}
}
