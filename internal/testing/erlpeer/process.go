package erlpeer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
	"github.com/sluice-dev/sluice/internal/testing/proc"
)

const (
	// startTimeout bounds the wait for a new process to serve; it is
	// generous because `go test ./...` runs many packages at once.
	startTimeout = 30 * time.Second
	// stopGrace is how long ERL has to end after SIGTERM before SIGKILL.
	stopGrace = 5 * time.Second
	logFile   = "erl.log"
	// healthService is the name ERL registers with gRPC health.
	healthService = "ratelimit"
)

var errAddrInUse = errors.New("address already in use")

// process is one run of the ERL binary.
type process struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once the process is reaped
}

// launch starts ERL in dir on three new free ports and waits until it
// serves.
func launch(bin, dir, redisAddr, configDir string, o options) (*Server, error) {
	ports, err := freeport.Loopback(3)
	if err != nil {
		return nil, fmt.Errorf("erl: %w", err)
	}
	logPath := filepath.Join(dir, logFile)
	log, err := os.Create(logPath) // a retry starts a new log
	if err != nil {
		return nil, fmt.Errorf("erl: %w", err)
	}
	defer log.Close() // the child has its own descriptor

	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = env(redisAddr, configDir, ports, o)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := proc.Start(cmd); err != nil {
		return nil, fmt.Errorf("erl: start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	s := &Server{
		dir:       dir,
		configDir: configDir,
		grpcAddr:  loopback(ports[0]),
		httpAddr:  loopback(ports[1]),
		debugAddr: loopback(ports[2]),
		proc:      p,
	}
	if err := s.waitServing(); err != nil {
		p.kill()
		out := readLog(logPath)
		if strings.Contains(out, "address already in use") {
			err = fmt.Errorf("%w: %w", err, errAddrInUse)
		}
		return nil, fmt.Errorf("erl: ratelimit on %s: %w; its log:\n%s", s.grpcAddr, err, out)
	}
	return s, nil
}

// waitServing waits until ERL answers on all three ports: its HTTP
// healthcheck says OK, gRPC health says SERVING, and the debug port lists
// its endpoints. ERL opens them only after its first configuration load,
// so by then the configuration folder has been read. A debug port that
// cannot be bound is only logged by ERL, hence the check.
func (s *Server) waitServing() error {
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	httpc := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-s.proc.exited:
			return errors.New("exited during start")
		default:
		}
		if answers(&httpc, "http://"+s.httpAddr+"/healthcheck", "OK") &&
			answers(&httpc, "http://"+s.debugAddr+"/", "/rlconfig") &&
			serving(health) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not serving after %s", startTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// answers reports whether url answers 200 with a body containing want.
func answers(c *http.Client, url, want string) bool {
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte(want))
}

// serving reports whether ERL's gRPC health says SERVING.
func serving(health healthpb.HealthClient) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: healthService})
	return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
}

// stop sends SIGTERM, on which ERL stops its servers and exits, and kills
// the process if it has not ended within stopGrace. It returns once the
// process is reaped.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopGrace):
		p.kill()
	}
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// readLog returns the log, or the read error.
func readLog(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(bytes.TrimSpace(b))
}
