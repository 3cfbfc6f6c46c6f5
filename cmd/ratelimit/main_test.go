package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/sluice-dev/sluice/internal/program"
	"github.com/sluice-dev/sluice/internal/testing/freeport"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

func TestRedisURLFromERLEnvironment(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, defaultRedisURL},
		{map[string]string{"REDIS_URL": "redis.ns:6379", "REDIS_SOCKET_TYPE": "tcp"}, "redis://redis.ns:6379"},
		{map[string]string{"REDIS_URL": "r:6379", "REDIS_SOCKET_TYPE": "tcp", "REDIS_AUTH": "s3cret", "REDIS_TLS": "true"}, "rediss://:s3cret@r:6379"},
		{map[string]string{"REDIS_URL": "r:6379", "REDIS_AUTH": "me:s3cret"}, "redis://me:s3cret@r:6379"},
		{map[string]string{"REDIS_URL": "mymaster,s1:26379,s2:26379", "REDIS_TYPE": "SENTINEL"}, "redis+sentinel://s1:26379?addr=s2%3A26379&master_name=mymaster"},
		{map[string]string{"REDIS_URL": "n1:6379,n2:6379", "REDIS_TYPE": "cluster"}, "redis+cluster://n1:6379?addr=n2%3A6379"},
		{map[string]string{"REDIS_URL": "redis://x:1/2"}, "redis://x:1/2"},
	}
	for _, tc := range cases {
		g := NewWithT(t)
		got, err := redisURLFromEnv(func(k string) string { return tc.env[k] })
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(tc.want), "%v", tc.env)
	}
	g := NewWithT(t)
	_, err := redisURLFromEnv(func(k string) string {
		return map[string]string{"REDIS_URL": "/var/run/r.sock", "REDIS_SOCKET_TYPE": "unix"}[k]
	})
	g.Expect(err).To(MatchError(ContainSubstring("only tcp is supported")))
}

func TestFlagsWinOverTheEnvironment(t *testing.T) {
	g := NewWithT(t)
	env := map[string]string{"GRPC_PORT": "9001", "DEBUG_PORT": "9002", "PORT": "9003", "RUNTIME_ROOT": "/data",
		"RUNTIME_SUBDIRECTORY": "ratelimit", "MERGE_DOMAIN_CONFIG": "true", "LOG_LEVEL": "WARN"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	o, _, err := parseFlags(nil, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.listen).To(Equal(":9001"))
	g.Expect(o.adminListen).To(Equal(":9002"))
	g.Expect(o.httpListen).To(Equal(":9003"))
	g.Expect(o.configDir).To(Equal("/data/ratelimit/config"))
	g.Expect(o.mergeDomains).To(BeTrue())
	g.Expect(o.logLevel.String()).To(Equal("WARN"))

	o, _, err = parseFlags([]string{"--listen", "127.0.0.1:7000", "--config-dir", "/etc/rl"}, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.listen).To(Equal("127.0.0.1:7000"))
	g.Expect(o.configDir).To(Equal("/etc/rl"))
}

func TestFailureModeFlag(t *testing.T) {
	g := NewWithT(t)
	env := map[string]string{}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	o, _, err := parseFlags(nil, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.failureMode).To(Equal("Open"))
	env["SLUICE_FAILURE_MODE"] = "LocalFallback"
	o, _, err = parseFlags(nil, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.failureMode).To(Equal("LocalFallback"))
	o, _, err = parseFlags([]string{"--failure-mode", "Closed"}, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.failureMode).To(Equal("Closed"), "the flag wins")
	_, _, err = parseFlags([]string{"--failure-mode", "closed"}, lookup)
	g.Expect(err).To(MatchError(ContainSubstring(`--failure-mode "closed" is not one of Open, Closed, LocalFallback`)))
}

func TestRedisTimeoutFlag(t *testing.T) {
	g := NewWithT(t)
	env := map[string]string{}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	o, _, err := parseFlags(nil, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.redisTimeout).To(Equal(50 * time.Millisecond))
	env["SLUICE_REDIS_TIMEOUT"] = "200ms"
	o, _, err = parseFlags(nil, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.redisTimeout).To(Equal(200 * time.Millisecond))
	o, _, err = parseFlags([]string{"--redis-timeout", "1s"}, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.redisTimeout).To(Equal(time.Second), "the flag wins")
	_, _, err = parseFlags([]string{"--redis-timeout", "10s"}, lookup)
	g.Expect(err).To(MatchError(ContainSubstring("--redis-timeout 10s must be between 1ms and 1s")))
}

// The built program, started as envoyproxy/ratelimit is: from its
// environment, with a folder of files, behind a real gRPC client.
func TestTheProgramServesEnvoysAPIAndReloads(t *testing.T) {
	g := NewWithT(t)
	bin := programBinary(t)
	srv := redistest.Start(t)
	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	write := func(name, content string) {
		tmp := filepath.Join(root, "tmp")
		g.Expect(os.WriteFile(tmp, []byte(content), 0o644)).To(Succeed())
		g.Expect(os.Rename(tmp, filepath.Join(dir, name))).To(Succeed())
	}
	write("shop.yaml", "domain: shop\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 2}}]")

	ports, err := freeport.Loopback(3)
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+srv.Addr(), "RUNTIME_ROOT="+root,
		"RUNTIME_SUBDIRECTORY=ratelimit", "GRPC_HOST=127.0.0.1", "HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1",
		"GRPC_PORT="+strconv.Itoa(ports[0]), "PORT="+strconv.Itoa(ports[1]), "DEBUG_PORT="+strconv.Itoa(ports[2]),
		"SLUICE_REDIS_TIMEOUT=1s") // a loaded machine must not hand decisions to the failure mode
	var logs syncBuffer
	cmd.Stderr = &logs
	g.Expect(cmd.Start()).To(Succeed())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})

	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", ports[0]), grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	healthClient := healthpb.NewHealthClient(conn)
	g.Eventually(func() (healthpb.HealthCheckResponse_ServingStatus, error) {
		r, err := healthClient.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
		return r.GetStatus(), err
	}, 10*time.Second, 50*time.Millisecond).Should(Equal(healthpb.HealthCheckResponse_SERVING))

	refl, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(refl.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})).To(Succeed())
	listed, err := refl.Recv()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(listed.GetListServicesResponse().GetService()).To(ContainElement(HaveField("Name", "envoy.service.ratelimit.v3.RateLimitService")))
	_ = refl.CloseSend()

	rl := ratelimitv3.NewRateLimitServiceClient(conn)
	call := func(user string) ratelimitv3.RateLimitResponse_Code {
		resp, err := rl.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: "shop",
			Descriptors: []*ratelimitv3common.RateLimitDescriptor{{Entries: []*ratelimitv3common.RateLimitDescriptor_Entry{{Key: "user", Value: user}}}}})
		g.Expect(err).NotTo(HaveOccurred())
		return resp.OverallCode
	}
	g.Expect(call("ann")).To(Equal(ratelimitv3.RateLimitResponse_OK))
	g.Expect(call("ann")).To(Equal(ratelimitv3.RateLimitResponse_OK))
	g.Expect(call("ann")).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT))

	httpGet := func(port int, path string) (int, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	g.Eventually(func() int { code, _ := httpGet(ports[2], "/readyz"); return code }, 5*time.Second).Should(Equal(http.StatusOK))
	code, body := httpGet(ports[1], "/healthcheck")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(Equal("OK"))

	// Calls keep being answered while the folder changes.
	stop := make(chan struct{})
	var calls sync.WaitGroup
	var callErrs []error
	var mu sync.Mutex
	calls.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := rl.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: "shop",
				Descriptors: []*ratelimitv3common.RateLimitDescriptor{{Entries: []*ratelimitv3common.RateLimitDescriptor_Entry{{Key: "user", Value: "load"}}}}})
			if err != nil {
				mu.Lock()
				callErrs = append(callErrs, err)
				mu.Unlock()
			}
		}
	})

	write("shop.yaml", "domain: shop\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 1}}, {key: ip, rate_limit: {unit: hour, requests_per_unit: 1}}]")
	g.Eventually(func() ratelimitv3.RateLimitResponse_Code { return call("bob-" + strconv.Itoa(time.Now().Nanosecond())) }, 5*time.Second, 20*time.Millisecond).
		Should(Equal(ratelimitv3.RateLimitResponse_OK))
	g.Eventually(func() string { _, m := httpGet(ports[2], "/metrics"); return m }, 5*time.Second).
		Should(ContainSubstring("sluice_ratelimit_config_reloads_total 2"))

	write("bad.yaml", "domain: mail\ndescriptors: [{key: to, rate_limit: {unit: fortnight, requests_per_unit: 1}}]")
	g.Eventually(func() string { _, m := httpGet(ports[2], "/metrics"); return m }, 5*time.Second).
		Should(ContainSubstring("sluice_ratelimit_config_reload_errors_total 1"))
	g.Eventually(logs.String, 5*time.Second).Should(ContainSubstring(filepath.Join(dir, "bad.yaml") + `: descriptors[0].rate_limit.unit (line 2): invalid rate limit unit \"fortnight\"`))
	g.Expect(call("carl")).To(Equal(ratelimitv3.RateLimitResponse_OK), "the last good configuration stays")
	g.Expect(call("carl")).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT), "with its new limit of 1")
	close(stop)
	calls.Wait()
	g.Expect(callErrs).To(BeEmpty(), "no call failed across the reloads")

	g.Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Eventually(exited, 10*time.Second).Should(Receive(BeNil()), "a clean exit after SIGTERM")
	g.Expect(logs.String()).To(ContainSubstring("stopped"))
}

func TestABadFolderStopsTheStart(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "x.yaml"), []byte("domain: d\ndescriptors: [{key: k, rate_limit: {unit: second}}]"), 0o644)).To(Succeed())
	var stderr bytes.Buffer
	rc := run(context.Background(), []string{"--config-dir", dir, "--listen", "127.0.0.1:0", "--admin-listen", "localhost:0", "--http-listen", ""},
		func(string) (string, bool) { return "", false }, io.Discard, &stderr)
	g.Expect(rc).To(Equal(program.ExitConfig))
	g.Expect(stderr.String()).To(ContainSubstring(filepath.Join(dir, "x.yaml") + ": descriptors[0].rate_limit.requests_per_unit (line 2): must be at least 1"))
}

// syncBuffer is a bytes.Buffer safe for the process' writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Clone(s.b.String())
}
