//go:build unix

package freeport

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// reserve takes p for the life of this process: an exclusive lock on a file
// named after it, which the kernel releases when the process ends however
// it ends. It reports false when another process holds p.
func reserve(p int) bool {
	dir := filepath.Join(os.TempDir(), "sluice-ports")
	if err := os.MkdirAll(dir, 0o1777); err != nil {
		return true // no lock directory: the listen check alone
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return false
	}
	held = append(held, f) // kept open: the lock lasts as long as the process
	return true
}

// held are the lock files of the ports this process reserved.
var held []*os.File
