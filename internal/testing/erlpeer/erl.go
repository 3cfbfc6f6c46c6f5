// Package erlpeer runs envoyproxy/ratelimit (ERL), the reference implementation
// of Envoy's rate limit service (envoy.service.ratelimit.v3), for tests that
// hold Sluice's own implementation to it: both read the same configuration
// folder and answer the same ShouldRateLimit calls.
//
// The binary is bin/erl/ratelimit under the checkout, built by `make erl`
// (hack/erl.sh, pinned in hack/erl; make test builds it too). Plain tests
// use Start, which stops the server in t.Cleanup; Ginkgo suites and programs
// without a testing.TB use New and call Close:
//
//	redis := redistest.Start(t)
//	peer := erl.Start(t, redis.Addr(), "testdata/erl")
//	client, err := peer.Client()
//
// ERL keeps its counters in Redis under keys of its own making
// (DOMAIN_KEY_VALUE_WINDOW), so give it a Redis server of its own, or a key
// prefix (WithEnv("CACHE_KEY_PREFIX=erl_")), when another limiter runs
// against the same one.
//
// ERL loads every file of the configuration folder (dot files aside) when
// it starts, and again whenever a file there is written, created or removed;
// a test that changes the configuration should write the new file elsewhere
// and rename it in, so that ERL never loads half a file, and then wait for
// Config to show it.
//
// The server listens on free 127.0.0.1 ports only, logs to erl.log in a
// directory of its own, and is started with Pdeathsig, so it dies with the
// test binary however that ends.
package erlpeer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-dev/sluice/internal/testing/proc"
)

// Binary is where make erl builds the server, relative to the checkout.
const Binary = "bin/erl/ratelimit"

// Option configures the server started by Start and New.
type Option func(*options)

type options struct {
	root     string
	logLevel string
	env      []string
}

// WithEnv adds ERL settings, KEY=VALUE each, for example
// WithEnv("LOCAL_CACHE_SIZE_IN_BYTES=1048576", "NEAR_LIMIT_RATIO=0.5").
// They may override the defaults (log level, stats off, dot files ignored),
// but not the addresses, Redis or the configuration folder.
func WithEnv(kv ...string) Option {
	return func(o *options) { o.env = append(o.env, kv...) }
}

// WithLogLevel sets ERL's LOG_LEVEL (default info); at debug it logs each
// descriptor it looks up and the Redis keys it counts under.
func WithLogLevel(level string) Option {
	return func(o *options) { o.logLevel = level }
}

// WithRoot names the checkout that holds bin/erl/ratelimit; by default it
// is found from the working directory.
func WithRoot(dir string) Option {
	return func(o *options) { o.root = dir }
}

// Server is one running ERL process. Its methods are safe for concurrent use.
type Server struct {
	dir       string
	ownsDir   bool
	configDir string
	grpcAddr  string
	httpAddr  string
	debugAddr string
	proc      *process

	mu     sync.Mutex
	conns  []io.Closer
	closed bool
}

// Start starts ERL against the Redis server at redisAddr (host:port) with
// the configuration files in configDir, and stops it when the test and its
// subtests finish. It fails the test when the binary is missing (saying
// which make target builds it) or when ERL does not come up (with its log).
func Start(t testing.TB, redisAddr, configDir string, opts ...Option) *Server {
	t.Helper()
	s, err := start(t.TempDir(), false, redisAddr, configDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// New is Start without a testing.TB: the caller must call Close, which also
// removes the server's directory.
func New(redisAddr, configDir string, opts ...Option) (*Server, error) {
	dir, err := os.MkdirTemp("", "erl-")
	if err != nil {
		return nil, fmt.Errorf("erl: %w", err)
	}
	s, err := start(dir, true, redisAddr, configDir, opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Path returns the ERL binary under root, or an error in one line that says
// how to build it.
func Path(root string) (string, error) {
	bin := filepath.Join(root, Binary)
	if _, err := os.Stat(bin); err != nil {
		return bin, fmt.Errorf("erl: %s is missing: run make erl, which builds envoyproxy/ratelimit there (make test does it too)", bin)
	}
	return bin, nil
}

// GRPCAddr is the address of the rate limit service and gRPC health,
// "127.0.0.1:PORT".
func (s *Server) GRPCAddr() string { return s.grpcAddr }

// HTTPAddr is the address of ERL's HTTP port: /healthcheck and /json, the
// JSON form of ShouldRateLimit.
func (s *Server) HTTPAddr() string { return s.httpAddr }

// DebugAddr is the address of ERL's debug port (/rlconfig, /stats).
func (s *Server) DebugAddr() string { return s.debugAddr }

// ConfigDir is the folder ERL loads its configuration from.
func (s *Server) ConfigDir() string { return s.configDir }

// Pid is the process id of the server.
func (s *Server) Pid() int { return s.proc.cmd.Process.Pid }

// Log returns what ERL has logged so far.
func (s *Server) Log() string { return readLog(s.proc.logPath) }

// Client returns a rate limit service client on a connection of its own,
// closed by Close.
func (s *Server) Client() (rlsv3.RateLimitServiceClient, error) {
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("erl: client for %s: %w", s.grpcAddr, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = conn.Close()
		return nil, errors.New("erl: client of a closed server")
	}
	s.conns = append(s.conns, conn)
	return rlsv3.NewRateLimitServiceClient(conn), nil
}

// Config returns the configuration ERL has loaded, as its debug endpoint
// /rlconfig prints it, one line per limit ("DOMAIN.KEY_VALUE...: unit=MINUTE
// requests_per_unit=3, ..."); empty when no configuration is loaded.
func (s *Server) Config() (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + s.debugAddr + "/rlconfig")
	if err != nil {
		return "", fmt.Errorf("erl: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("erl: read /rlconfig: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("erl: /rlconfig: %s", resp.Status)
	}
	return string(b), nil
}

// Close stops the server (SIGTERM to its PID, SIGKILL if it has not ended
// within a few seconds), closes the clients handed out by Client and, for a
// server made by New, removes its directory. It can be called more than once.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
	s.proc.stop()
	if s.ownsDir {
		_ = os.RemoveAll(s.dir)
	}
}

// start starts ERL in dir on free ports. Another test binary may take a port
// between the moment it is found free and the moment ERL binds it, so a
// start that fails with "address already in use" is retried on other ports.
func start(dir string, ownsDir bool, redisAddr, configDir string, opts []Option) (*Server, error) {
	o := options{logLevel: "info"}
	for _, opt := range opts {
		opt(&o)
	}
	if o.root == "" {
		root, err := proc.Root()
		if err != nil {
			return nil, fmt.Errorf("erl: %w", err)
		}
		o.root = root
	}
	bin, err := Path(o.root)
	if err != nil {
		return nil, err
	}
	configDir, err = filepath.Abs(configDir)
	if err != nil {
		return nil, fmt.Errorf("erl: %w", err)
	}
	if info, err := os.Stat(configDir); err != nil || !info.IsDir() {
		return nil, fmt.Errorf("erl: configuration folder %s is not a folder", configDir)
	}
	const attempts = 5
	for i := 0; ; i++ {
		s, err := launch(bin, dir, redisAddr, configDir, o)
		if err == nil {
			s.ownsDir = ownsDir
			return s, nil
		}
		if !errors.Is(err, errAddrInUse) || i == attempts-1 {
			return nil, err
		}
	}
}

// env is ERL's whole environment: nothing is inherited, so that settings in
// the caller's shell (PORT, REDIS_URL...) never reach it.
func env(redisAddr, configDir string, ports []int, o options) []string {
	kv := []string{
		"LOG_LEVEL=" + o.logLevel,
		"USE_STATSD=false",
		"RUNTIME_IGNOREDOTFILES=true",
	}
	kv = append(kv, o.env...)
	// ERL reads RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY and,
	// with RUNTIME_WATCH_ROOT=false, watches that folder itself rather than
	// a symlink swapped at the root.
	return append(kv,
		"RUNTIME_ROOT="+filepath.Dir(configDir),
		"RUNTIME_SUBDIRECTORY=",
		"RUNTIME_APPDIRECTORY="+filepath.Base(configDir),
		"RUNTIME_WATCH_ROOT=false",
		"CONFIG_TYPE=FILE",
		"BACKEND_TYPE=redis",
		"REDIS_SOCKET_TYPE=tcp",
		"REDIS_TYPE=SINGLE",
		"REDIS_URL="+redisAddr,
		"GRPC_HOST=127.0.0.1",
		"GRPC_PORT="+strconv.Itoa(ports[0]),
		"HOST=127.0.0.1",
		"PORT="+strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1",
		"DEBUG_PORT="+strconv.Itoa(ports[2]),
	)
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
