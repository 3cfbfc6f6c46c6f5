// Package proc holds what the local harnesses (internal/testing/stack, the
// stand-in kubelet of make demo and the e2e suite, and internal/testing/node,
// the real node) share to run their processes: a fork that Pdeathsig can rely
// on, the checkout they build from, the children envtest starts without
// naming them, and the end of a log for an error message.
package proc

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Module is the module whose checkout the harnesses build and run.
const Module = "github.com/sluice-dev/sluice"

// Pdeathsig fires when the OS thread that forked the child exits, not the
// process, and Go may end a thread while the process runs on. So every
// child is forked from one goroutine locked to a thread that never ends.
type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce     sync.Once
	spawnRequests chan spawnRequest
)

// Start starts cmd from the one thread that never ends, so that a
// Pdeathsig in cmd.SysProcAttr fires only when this process dies.
func Start(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: see above
			for req := range spawnRequests {
				req.done <- req.cmd.Start()
			}
		}()
	})
	req := spawnRequest{cmd: cmd, done: make(chan error, 1)}
	spawnRequests <- req
	return <-req.done
}

// Root walks up from the working directory to the checkout of Module.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			line, _ := bufio.NewReader(f).ReadString('\n')
			_ = f.Close()
			if strings.TrimSpace(line) == "module "+Module {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the " + Module + " module: run from its checkout or set Options.Root")
		}
		dir = parent
	}
}
