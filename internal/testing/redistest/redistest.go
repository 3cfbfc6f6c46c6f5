// Package redistest starts real redis-server processes for tests: standalone
// servers and Redis Clusters on free loopback ports, with no persistence, and
// lets fault tests kill, restart, freeze and thaw them.
//
// Plain tests use Start and StartCluster, which stop the servers in
// t.Cleanup. Ginkgo suites and programs without a testing.TB use New and
// NewCluster and call Close:
//
//	var _ = BeforeSuite(func() {
//		var err error
//		srv, err = redistest.New()
//		Expect(err).NotTo(HaveOccurred())
//		DeferCleanup(srv.Close)
//	})
//
// Servers listen on 127.0.0.1 only, keep nothing on disk (save "",
// appendonly no) and log to redis.log in their directory; a server that
// cannot start is reported with that log.
//
// Every server is started with Pdeathsig on Linux, so it dies with the test
// binary even when the binary panics, times out or is killed.
//
// redis-server must be on PATH; `make redis` (hack/ensure-redis.sh) installs it.
package redistest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Option configures the servers started by Start, New, StartCluster and NewCluster.
type Option func(*config)

type config struct {
	args         []string
	sentinelConf string
	tls          []string  // --tls-* arguments but the port
	clockAt      time.Time // WithClockAt; zero for the machine's clock
}

// WithArgs adds redis-server command-line configuration, for example
// WithArgs("--maxmemory", "1mb", "--maxmemory-policy", "allkeys-lru").
// It can override the defaults (no persistence, DEBUG enabled, cluster node
// timeout), but not the port, bind address, directory or log file.
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithTLS also serves TLS, on a port of its own (TLSAddr), with the
// certificate and key files given; clients are not asked for certificates.
func WithTLS(certFile, keyFile string) Option {
	return func(c *config) {
		c.tls = []string{"--tls-cert-file", certFile, "--tls-key-file", keyFile,
			"--tls-ca-cert-file", certFile, "--tls-auth-clients", "no"}
	}
}

// Server is one redis-server process on 127.0.0.1. Its methods are safe for
// concurrent use.
type Server struct {
	bin     string
	dir     string
	ownsDir bool // New made dir and Close removes it
	port    int
	busPort int // cluster bus port; 0 for a standalone server
	tlsPort int // 0 without WithTLS
	tls     []string
	// sentinelConf is the configuration file of a Sentinel; empty for a
	// Redis server.
	sentinelConf string
	args         []string
	clockAt      time.Time // where a faked clock starts (WithClockAt)

	mu      sync.Mutex
	proc    *process // nil while stopped
	clients []io.Closer
	closed  bool
	cgroup  string // the directory LimitCPU made; empty without
}

// Start starts a standalone redis-server in t.TempDir() and stops it when
// the test and its subtests finish. It fails the test, with the server's
// log, if the server cannot start.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := newServer(t.TempDir(), false, false, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// New starts a standalone redis-server in a new temporary directory. The
// caller must call Close, which also removes the directory.
func New(opts ...Option) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s, err := newServer(dir, true, false, opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// newServer starts a server in dir on free ports, a cluster node if
// clusterNode is set. Another test binary may take a port between the moment it
// is found free and the moment redis-server binds it, so a start that fails
// with "Address already in use" is retried on other ports.
func newServer(dir string, ownsDir, clusterNode bool, opts []Option) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New(`redistest: redis-server is not on PATH: run "make redis" (hack/ensure-redis.sh) to install it`)
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	s := &Server{bin: bin, dir: dir, ownsDir: ownsDir, args: cfg.args, sentinelConf: cfg.sentinelConf, tls: cfg.tls, clockAt: cfg.clockAt}
	const attempts = 5
	for i := 0; ; i++ {
		n := 1
		if clusterNode {
			n = 2 // and a bus port
		}
		if s.tls != nil {
			n++ // and a TLS port, chosen with the others so that none is taken twice
		}
		ports, err := freePorts(n)
		if err != nil {
			return nil, err
		}
		s.port = ports[0]
		if s.tls != nil {
			s.tlsPort = ports[n-1]
		}
		if clusterNode {
			s.busPort = ports[1]
			// A failed attempt may have written a node identity; start afresh.
			_ = os.Remove(filepath.Join(dir, "nodes.conf"))
		}
		err = s.start()
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errAddrInUse) || i == attempts-1 {
			return nil, err
		}
	}
}

// Addr returns the server's address, "127.0.0.1:PORT".
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// TLSAddr returns the address of the server's TLS port (WithTLS).
func (s *Server) TLSAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort))
}

// URL returns the server's URL, "redis://127.0.0.1:PORT".
func (s *Server) URL() string {
	return "redis://" + s.Addr()
}

// Client returns a new client for the server with go-redis default options.
// Each call returns its own client (and connection pool), so a test can close
// or misuse it without affecting others. The caller may close it; Close
// closes every client that is still open.
//
// By default go-redis retries a failed dial 5 times 100ms apart and a failed
// command 3 times, so against a stopped server a command takes over a second
// to fail. Fault tests that want the error at once make their own client:
//
//	redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1})
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	s.track(c)
	return c
}

func (s *Server) track(c io.Closer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients = append(s.clients, c)
}

// Stop kills the server with SIGKILL, as in a crash: open connections are
// reset and new ones are refused until Restart. It does nothing if the
// server is already stopped.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.proc != nil {
		s.proc.kill()
		s.proc = nil
	}
}

// Restart stops the server if it is running and starts a new process on the
// same port, waiting until it answers PING. Without persistence the new
// process starts empty: every key and loaded script is gone. A cluster node
// keeps its identity and slots (they are in its cluster config file), but
// Redis holds a restarted master in cluster_state:fail, answering
// CLUSTERDOWN, for its first 2 seconds.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("redistest: restart of a closed server")
	}
	s.stopLocked()
	// The port was free a moment ago, but another test binary may grab it
	// while it is; try a few times before giving up.
	var err error
	for range 5 {
		if err = s.startLocked(); !errors.Is(err, errAddrInUse) {
			return err
		}
	}
	return err
}

// Freeze stops the server process with SIGSTOP: connections stay open and
// the kernel still accepts new ones, but nothing is answered, so clients
// time out. Thaw resumes it. Freeze does nothing if the server is stopped.
func (s *Server) Freeze() {
	s.signal(syscall.SIGSTOP)
}

// Thaw resumes a server frozen by Freeze with SIGCONT; it answers the
// commands that arrived meanwhile.
func (s *Server) Thaw() {
	s.signal(syscall.SIGCONT)
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		_ = s.proc.cmd.Process.Signal(sig)
	}
}

// Close kills the server, closes the clients handed out by Client and, for a
// server made by New, removes its directory. It can be called more than once.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.stopLocked()
	s.removeCgroup()
	for _, c := range s.clients {
		_ = c.Close()
	}
	s.clients = nil
	if s.ownsDir {
		_ = os.RemoveAll(s.dir)
	}
}

// pid returns the process id of the running server, or 0 when stopped.
func (s *Server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}
