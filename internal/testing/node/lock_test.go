package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// lockHelperEnv makes the test binary a process that holds the lock at
// the path it names until its stdin closes.
const lockHelperEnv = "SLUICE_NODE_LOCK_HELPER"

func TestMain(m *testing.M) {
	if path := os.Getenv(lockHelperEnv); path != "" {
		l, err := tryLock(path)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("locked")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		_ = l.release()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holdLock starts another process holding the lock at path; the function
// it returns ends that process.
func holdLock(t *testing.T, path string) (*exec.Cmd, func()) {
	g := NewWithT(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	g.Expect(err).NotTo(HaveOccurred())
	stdout, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cmd.Start()).To(Succeed())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(line).To(Equal("locked\n"))
	end := func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}
	t.Cleanup(end)
	return cmd, end
}

func TestLockIsHeldAcrossProcessesAndNamesItsHolder(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "run", "lock")
	holder, end := holdLock(t, path)

	_, err := tryLock(path)
	var held *HeldError
	g.Expect(errors.As(err, &held)).To(BeTrue(), "a second run is refused while the first holds the lock: %v", err)
	g.Expect(held.Holder.Pid).To(Equal(holder.Process.Pid))
	g.Expect(held.Holder.Command).To(HavePrefix(os.Args[0] + " -test.run=^$"))
	g.Expect(err.Error()).To(ContainSubstring("pid " + strconv.Itoa(holder.Process.Pid) + " (" + os.Args[0]))
	g.Expect(err.Error()).NotTo(ContainSubstring("\n"), "one line")

	// A waiting run says once whom it waits for, and gives up with its context.
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	_, err = waitLock(ctx, path, &out)
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(strings.Count(out.String(), "\n")).To(Equal(1), "one line, however long it waits: %q", out.String())
	g.Expect(out.String()).To(HavePrefix(fmt.Sprintf("waiting for the real-node run of pid %d (", holder.Process.Pid)))

	// It gets the lock once the holder ends, and then holds it itself.
	got := make(chan error, 1)
	var lock *hostLock
	go func() {
		var err error
		lock, err = waitLock(context.Background(), path, &bytes.Buffer{})
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("waitLock returned while the holder runs: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	end()
	g.Eventually(got).WithTimeout(5 * time.Second).Should(Receive(BeNil()))
	defer func() { _ = lock.release() }()
	_, err = tryLock(path)
	g.Expect(errors.As(err, &held)).To(BeTrue())
	g.Expect(held.Holder.Pid).To(Equal(os.Getpid()))
}

func TestLockIsFreeAfterItsHolderIsKilled(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "lock")
	holder, _ := holdLock(t, path)
	g.Expect(holder.Process.Kill()).To(Succeed())
	_, _ = holder.Process.Wait()
	l, err := tryLock(path)
	g.Expect(err).NotTo(HaveOccurred(), "a killed run leaves no lock behind")
	g.Expect(l.release()).To(Succeed())
}
