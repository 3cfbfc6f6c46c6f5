package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lockPath is the host-wide lock of real-node runs (Start, UndoStale):
// make demo-node, make test-node and make node-undo take it before they
// change anything, so that two runs never undo each other's bridge, cgroups
// and iptables rules.
var lockPath = filepath.Join(stateDir, "lock")

// Holder is the process that holds the host-wide lock.
type Holder struct {
	Pid int
	// Command is its command line, as /proc/<pid>/cmdline gives it.
	Command string
}

func (h Holder) String() string {
	if h.Pid == 0 {
		return "a process this one cannot see"
	}
	cmd := h.Command
	if len(cmd) > 160 {
		cmd = cmd[:157] + "..."
	}
	return fmt.Sprintf("pid %d (%s)", h.Pid, cmd)
}

// HeldError says another run holds the lock.
type HeldError struct {
	Path   string
	Holder Holder
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("another real-node run holds %s: %s; stop it (it restores the host as it ends) or wait for it", e.Path, e.Holder)
}

// hostLock is a held lock: closing the file releases it, and so does the
// holder's death.
type hostLock struct{ f *os.File }

func (l *hostLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// tryLock takes the lock at path at once, or returns a *HeldError naming
// the process that holds it.
func tryLock(path string) (*hostLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	// O_CLOEXEC (os.OpenFile's default): the daemons a run starts must
	// not inherit the lock, or one left running would hold it.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return &hostLock{f: f}, nil
	}
	defer f.Close()
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return nil, &HeldError{Path: path, Holder: lockHolder(f)}
}

// waitLock takes the lock at path, waiting while another run holds it.
// It writes one line to w when it starts waiting, and one more each time
// the holder changes. It gives up when ctx ends.
func waitLock(ctx context.Context, path string, w io.Writer) (*hostLock, error) {
	var last Holder
	for {
		l, err := tryLock(path)
		var held *HeldError
		if !errors.As(err, &held) {
			return l, err
		}
		if held.Holder != last {
			last = held.Holder
			fmt.Fprintf(w, "waiting for the real-node run of %s to end: one run at a time on this host (%s); Ctrl-C gives up\n", held.Holder, path)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("gave up waiting for the real-node run of %s: %w", held.Holder, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// lockHolder finds the process holding a flock on f's file in
// /proc/locks, which names it by pid and the file by device and inode.
func lockHolder(f *os.File) Holder {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return Holder{}
	}
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return Holder{}
	}
	defer locks.Close()
	// 1: FLOCK  ADVISORY  WRITE 4711 00:1a:3342 0 EOF; waiters are "1: -> FLOCK ...".
	want := fmt.Sprintf("%02x:%02x:%d", devMajor(st.Dev), devMinor(st.Dev), st.Ino)
	s := bufio.NewScanner(locks)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != want {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid <= 0 {
			continue
		}
		return Holder{Pid: pid, Command: commandLine(pid)}
	}
	return Holder{}
}

func devMajor(dev uint64) uint64 { return (dev>>8)&0xfff | (dev>>32)&^0xfff }
func devMinor(dev uint64) uint64 { return dev&0xff | (dev>>12)&^0xff }

// commandLine is a process's arguments joined by spaces.
func commandLine(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return "command unknown"
	}
	return strings.Join(strings.Split(strings.TrimRight(string(data), "\x00"), "\x00"), " ")
}
