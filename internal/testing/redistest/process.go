package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
)

const (
	// startTimeout bounds the wait for a new process to answer PING; it
	// is generous because `go test ./...` runs many packages at once.
	startTimeout = 10 * time.Second
	logFile      = "redis.log"
	// readyLine is what redis-server logs once it listens. Waiting for it
	// in our own log proves that the PING answer comes from our process and
	// not from another test's server that took the port first.
	readyLine = "Ready to accept connections"
	// A Sentinel logs no "Ready" line; it is ready once it monitors.
	sentinelReadyLine = "+monitor master"
)

var errAddrInUse = errors.New("address already in use")

// process is one run of redis-server; Restart makes a new one.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is reaped
}

// kill sends SIGKILL and waits until the process is gone, so its port is
// free and its pid is reaped when kill returns.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startLocked()
}

// startLocked starts redis-server on s.port and waits until it is ready.
func (s *Server) startLocked() error {
	logPath := filepath.Join(s.dir, logFile)
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	defer log.Close() // the child has its own descriptor
	// Restart appends to the same log; only this run's part matters.
	info, err := log.Stat()
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	logStart := info.Size()

	cmd := exec.Command(s.bin, s.argv()...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = log, log
	if !s.clockAt.IsZero() {
		if cmd.Env, err = fakeClockEnv(s.clockAt); err != nil {
			return err
		}
	}
	if err := startProcess(cmd); err != nil {
		return fmt.Errorf("redistest: start %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()

	if err := waitReady(s.Addr(), logPath, logStart, s.readyLine(), p.exited); err != nil {
		p.kill()
		out := readLog(logPath, logStart)
		if strings.Contains(out, "Address already in use") {
			err = fmt.Errorf("%w: %w", err, errAddrInUse)
		}
		return fmt.Errorf("redistest: redis-server on %s: %w; its log:\n%s", s.Addr(), err, out)
	}
	s.proc = p
	return nil
}

// argv is the redis-server command line: overridable defaults, then the
// caller's arguments, then what this package depends on.
func (s *Server) argv() []string {
	var args []string
	if s.sentinelConf != "" {
		// A Sentinel reads and rewrites its own configuration file.
		args = append(args, s.sentinelConf, "--sentinel")
	}
	args = append(args,
		"--save", "",
		"--appendonly", "no",
		"--enable-debug-command", "local",
	)
	if s.busPort > 0 {
		args = append(args, "--cluster-node-timeout", strconv.Itoa(clusterNodeTimeoutMillis))
	}
	args = append(args, s.args...)
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--daemonize", "no",
		"--logfile", "",
		"--loglevel", "notice",
	)
	if s.tlsPort > 0 {
		args = append(append(args, "--tls-port", strconv.Itoa(s.tlsPort)), s.tls...)
	}
	if s.busPort > 0 {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(s.busPort),
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
		)
	}
	return args
}

// readyLine is what the server logs once it accepts connections.
func (s *Server) readyLine() string {
	if s.sentinelConf != "" {
		return sentinelReadyLine
	}
	return readyLine
}

// waitReady waits until the process has logged that it listens and answers
// PING on addr, or has exited.
func waitReady(addr, logPath string, logStart int64, readyLine string, exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	logged := false
	for {
		select {
		case <-exited:
			return errors.New("exited during start")
		default:
		}
		if !logged {
			logged = strings.Contains(readLog(logPath, logStart), readyLine)
		}
		if logged && ping(addr) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", startTimeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ping reports whether a Redis server answers on addr. Any reply but
// -LOADING counts, so that a server started with requirepass (-NOAUTH) is
// ready too.
func ping(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return false
	}
	return strings.HasPrefix(line, "+") || (strings.HasPrefix(line, "-") && !strings.HasPrefix(line, "-LOADING"))
}

// readLog returns the log written since offset from, or the read error.
func readLog(path string, from int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if from <= int64(len(b)) {
		b = b[from:]
	}
	return string(bytes.TrimSpace(b))
}

// freePorts returns n distinct free loopback ports.
func freePorts(n int) ([]int, error) { return freeport.Loopback(n) }
