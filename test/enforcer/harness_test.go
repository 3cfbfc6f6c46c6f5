package enforcer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
)

// namespace is a namespace of the test's own.
// It is a DNS label, as the API server requires: a test name too long for
// one is cut and given a hash of the whole, so that it stays the test's own.
func namespace(t testing.TB) string {
	s := strings.ToLower(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(t.Name(), "-"))
	s = strings.Trim(s, "-")
	if len(s) > 63 {
		sum := sha256.Sum256([]byte(s))
		s = strings.Trim(s[:54], "-") + "-" + hex.EncodeToString(sum[:4])
	}
	return s
}

// setup says how to run one enforcer.
type setup struct {
	// Exactly one of policies (RateLimitPolicy YAML) or config (compiled
	// JSON), written to configPath (made in a temp dir when empty).
	policies, config string
	configPath       string
	redisURL         string // shared's when empty
	upstream         string // a fresh "ok" application when empty
	env              []string
	args             []string
}

// instance is one running enforcer.
type instance struct {
	url, admin string
	configPath string
	cmd        *exec.Cmd
	logs       *syncBuffer
	exited     chan struct{}
	exitErr    error
}

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
	return s.b.String()
}

// okApp is an application answering 200 "ok".
func okApp(t testing.TB) string {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(app.Close)
	return app.URL
}

// freeAddrs returns two distinct free loopback addresses, for --listen and
// --admin-listen.
func freeAddrs(t testing.TB) (listen, admin string) {
	addrs, err := freeport.LoopbackAddrs(2)
	if err != nil {
		t.Fatal(err)
	}
	return addrs[0], addrs[1]
}

// start runs an enforcer as s says and waits until it serves; it is
// stopped (SIGTERM) when the test ends.
func start(t testing.TB, s setup) *instance {
	t.Helper()
	if s.redisURL == "" {
		s.redisURL = shared.URL()
	}
	if s.upstream == "" {
		s.upstream = okApp(t)
	}
	if s.configPath == "" {
		name := "config.json"
		if s.policies != "" {
			name = "policies.yaml"
		}
		s.configPath = filepath.Join(t.TempDir(), name)
	}
	content, flag := s.config, "--config"
	if s.policies != "" {
		content, flag = s.policies, "--policy-file"
	}
	if content != "" {
		if err := os.WriteFile(s.configPath, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	listen, admin := freeAddrs(t)
	args := append([]string{"--listen", listen, "--admin-listen", admin, "--upstream", s.upstream,
		"--redis-url", s.redisURL, flag, s.configPath, "--pod-namespace", namespace(t), "--pod-name", "test-0"}, s.args...)
	in := &instance{url: "http://" + listen, admin: "http://" + admin, configPath: s.configPath,
		logs: &syncBuffer{}, exited: make(chan struct{})}
	in.cmd = exec.Command(binary, args...)
	in.cmd.Env = append(os.Environ(), s.env...)
	in.cmd.Stdout, in.cmd.Stderr = in.logs, in.logs
	in.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		in.exitErr = in.cmd.Wait()
		close(in.exited)
	}()
	t.Cleanup(func() { in.stop(t) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-in.exited:
			t.Fatalf("sluice-enforcer exited at start (%v):\n%s", in.exitErr, in.logs)
		default:
		}
		if resp, err := http.Get(in.admin + "/healthz"); err == nil {
			resp.Body.Close()
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice-enforcer did not serve within 20s:\n%s", in.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for the process to end.
func (in *instance) stop(t testing.TB) {
	select {
	case <-in.exited:
		return
	default:
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.exited:
	case <-time.After(30 * time.Second):
		_ = in.cmd.Process.Kill()
		<-in.exited
		t.Errorf("sluice-enforcer ignored SIGTERM for 30s:\n%s", in.logs)
	}
}

// response is what a client saw.
type response struct {
	status int
	header http.Header
	body   string
	took   time.Duration
}

// client keeps connections alive between requests, as real clients do.
var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}

// do sends a request with "Name: value" headers.
func do(t testing.TB, method, url string, headers ...string) response {
	t.Helper()
	r, err := tryDo(context.Background(), method, url, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

func tryDo(ctx context.Context, method, url string, headers ...string) (response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return response{}, err
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Add(k, v)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(body), time.Since(start)}, err
}

func get(t testing.TB, url string, headers ...string) response {
	t.Helper()
	return do(t, http.MethodGet, url, headers...)
}

// limitHeaders are the X-RateLimit-* and IETF headers of r, "" when absent.
func limitHeaders(r response) [5]string {
	return [5]string{r.header.Get("X-RateLimit-Limit"), r.header.Get("X-RateLimit-Remaining"),
		r.header.Get("RateLimit-Policy"), r.header.Get("RateLimit"), r.header.Get("Retry-After")}
}

// policy is a RateLimitPolicy selecting pods labelled app=api (without
// --labels-file every policy applies), with the given spec
// lines after selector and upstreamPort (indented two spaces). Its Redis
// timeout is the longest allowed, 1s, unless spec sets one: tests that
// check Redis' answers must not see a failure mode decide because a busy
// machine (the race detector, parallel packages) was slow for 50ms.
func policy(name, spec string) string {
	if !strings.Contains(spec, "timeout:") {
		spec = "  timeout: 1s\n" + spec
	}
	return fmt.Sprintf("apiVersion: sluice.dev/v1alpha1\nkind: RateLimitPolicy\nmetadata: {name: %s}\nspec:\n  selector: {matchLabels: {app: api}}\n  upstreamPort: 8080\n%s\n", name, spec)
}
