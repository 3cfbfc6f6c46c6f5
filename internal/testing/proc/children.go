package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Tail is the last n bytes of the file at path (a process's log, for error
// messages), empty when it cannot be read.
func Tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > n {
		_, _ = f.Seek(info.Size()-n, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	return string(data)
}

// ChildPids lists the children of this process whose command or executable
// is name: envtest starts etcd and kube-apiserver without telling their pids.
func ChildPids(name string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, comm, err := stat(pid)
		if err != nil || ppid != self {
			continue
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if comm == name || filepath.Base(exe) == name {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// stat reads the parent pid and command name of pid from /proc.
func stat(pid int) (ppid int, comm string, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", err
	}
	s := string(data)
	// The command is in parentheses and may hold any byte, ")" included.
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open || closing+2 >= len(s) {
		return 0, "", errors.New("malformed /proc stat")
	}
	comm = s[open+1 : closing]
	var state string
	_, err = fmt.Sscanf(s[closing+2:], "%s %d", &state, &ppid)
	return ppid, comm, err
}
