package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
)

// The program is built once for the package's tests, into binDir.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// programBinary builds sluice-ratelimit, once.
func programBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "sluice-ratelimit-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "sluice-ratelimit")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// runningService is one run of the built sluice-ratelimit on loopback ports.
type runningService struct {
	grpcAddr, adminAddr string
	client              ratelimitv3.RateLimitServiceClient
	logs                *syncBuffer
}

// startProgram runs the built program on the files of configDir with the
// Redis of redisURL and extra flags, until the test ends; it returns once
// the program is SERVING. Redis has a second to answer, so that a loaded
// machine does not hand decisions to the failure mode.
func startProgram(t *testing.T, configDir, redisURL string, flags ...string) *runningService {
	t.Helper()
	g := NewWithT(t)
	ports, err := freeport.Loopback(2)
	g.Expect(err).NotTo(HaveOccurred())
	p := &runningService{grpcAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]), adminAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]), logs: &syncBuffer{}}
	args := append([]string{"--config-dir", configDir, "--redis-url", redisURL, "--listen", p.grpcAddr,
		"--admin-listen", p.adminAddr, "--http-listen", "", "--redis-timeout", "1s"}, flags...)
	cmd := exec.Command(programBinary(t), args...)
	cmd.Stderr = p.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	g.Expect(cmd.Start()).To(Succeed())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("sluice-ratelimit logs:\n%s", p.logs.String())
		}
	})
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = conn.Close() })
	health := healthpb.NewHealthClient(conn)
	g.Eventually(func() (healthpb.HealthCheckResponse_ServingStatus, error) {
		r, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: ratelimitv3.RateLimitService_ServiceDesc.ServiceName})
		return r.GetStatus(), err
	}, 20*time.Second, 20*time.Millisecond).Should(Equal(healthpb.HealthCheckResponse_SERVING), "sluice-ratelimit serves")
	p.client = ratelimitv3.NewRateLimitServiceClient(conn)
	return p
}

// get fetches a path of the admin listener: its status and body.
func (p *runningService) get(path string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + p.adminAddr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metric is the value of one sample of /metrics, as its line reads
// ("name{labels}"), "" when absent.
func (p *runningService) metric(sample string) string {
	_, body := p.get("/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}

// writeFile writes name in dir.
func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// desc writes a descriptor as key, value, key, value...
func desc(kv ...string) *ratelimitv3common.RateLimitDescriptor {
	d := &ratelimitv3common.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3common.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// shouldRateLimit calls c with a deadline.
func shouldRateLimit(c ratelimitv3.RateLimitServiceClient, req *ratelimitv3.RateLimitRequest) (*ratelimitv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.ShouldRateLimit(ctx, req)
}
