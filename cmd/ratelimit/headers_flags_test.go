package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-dev/sluice/enforcer/rls"
	"github.com/sluice-dev/sluice/internal/testing/freeport"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

func TestResponseHeadersFromFlagsAndERLEnvironment(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want rls.ResponseHeaders
	}{
		{nil, nil, rls.ResponseHeaders{ERLLimit: "RateLimit-Limit", ERLRemaining: "RateLimit-Remaining", ERLReset: "RateLimit-Reset"}},
		{nil, map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_RESET_HEADER": "X-Reset"},
			rls.ResponseHeaders{ERL: true, ERLLimit: "RateLimit-Limit", ERLRemaining: "RateLimit-Remaining", ERLReset: "X-Reset"}},
		{nil, map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "false"}, rls.ResponseHeaders{ERLLimit: "RateLimit-Limit", ERLRemaining: "RateLimit-Remaining", ERLReset: "RateLimit-Reset"}},
		{[]string{"--response-headers", "ietf,x-ratelimit", "--erl-header-names", "a,b,c"}, map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_LIMIT_HEADER": "z"},
			rls.ResponseHeaders{IETF: true, XRateLimit: true, ERLLimit: "a", ERLRemaining: "b", ERLReset: "c"}},
		{[]string{"--response-headers", "all"}, nil, rls.ResponseHeaders{ERL: true, IETF: true, XRateLimit: true, ERLLimit: "RateLimit-Limit", ERLRemaining: "RateLimit-Remaining", ERLReset: "RateLimit-Reset"}},
	}
	for _, tc := range cases {
		g := NewWithT(t)
		o, _, err := parseFlags(tc.args, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(o.headers.parsed).To(Equal(tc.want), "%v %v", tc.args, tc.env)
	}
	for _, bad := range [][]string{{"--response-headers", "erl,draft"}, {"--erl-header-names", "a,b"}, {"--response-headers", "erl,ietf", "--erl-header-names", "a,b,RateLimit"}} {
		_, _, err := parseFlags(bad, func(string) (string, bool) { return "", false })
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("--")), "%v", bad)
	}
	_, _, err := parseFlags(nil, func(k string) (string, bool) {
		if k == "LIMIT_RESPONSE_HEADERS_ENABLED" {
			return "maybe", true
		}
		return "", false
	})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("LIMIT_RESPONSE_HEADERS_ENABLED")))
}

// The built program, with envoyproxy/ratelimit's switch on: its headers,
// a limit override and negative hits over gRPC.
func TestTheProgramAnswersOverridesNegativeHitsAndHeaders(t *testing.T) {
	g := NewWithT(t)
	bin := filepath.Join(t.TempDir(), "sluice-ratelimit")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	srv := redistest.Start(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte("domain: shop\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 2}}]"), 0o644)).To(Succeed())
	ports, err := freeport.Loopback(2)
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(bin, "--config-dir", dir, "--http-listen", "", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--admin-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]), "--response-headers", "erl,ietf")
	cmd.Env = append(os.Environ(), "REDIS_URL="+srv.Addr(), "LIMIT_REMAINING_HEADER=X-Left")
	var logs syncBuffer
	cmd.Stderr = &logs
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", ports[0]), grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	rl := ratelimitv3.NewRateLimitServiceClient(conn)
	call := func(d *ratelimitv3common.RateLimitDescriptor) (*ratelimitv3.RateLimitResponse, error) {
		return rl.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: "shop", Descriptors: []*ratelimitv3common.RateLimitDescriptor{d}})
	}
	user := func(name string) *ratelimitv3common.RateLimitDescriptor {
		return &ratelimitv3common.RateLimitDescriptor{Entries: []*ratelimitv3common.RateLimitDescriptor_Entry{{Key: "user", Value: name}}}
	}
	headers := func(resp *ratelimitv3.RateLimitResponse) map[string]string {
		m := map[string]string{}
		for _, h := range resp.GetResponseHeadersToAdd() {
			m[h.Key] = h.Value
		}
		return m
	}
	var resp *ratelimitv3.RateLimitResponse
	g.Eventually(func() error { resp, err = call(user("ann")); return err }, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Expect(headers(resp)).To(SatisfyAll(HaveKeyWithValue("RateLimit-Limit", "2"), HaveKeyWithValue("X-Left", "1"), HaveKey("RateLimit-Reset"),
		HaveKeyWithValue("RateLimit-Policy", `"shop/user";q=2;w=3600`), HaveKey("RateLimit"), Not(HaveKey("Retry-After"))))
	resp, err = call(user("ann"))
	g.Expect(err).NotTo(HaveOccurred())
	resp, err = call(user("ann"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.OverallCode).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT))
	g.Expect(headers(resp)).To(SatisfyAll(HaveKeyWithValue("X-Left", "0"), HaveKey("Retry-After")))

	// negative hits give one back, and no more than was taken
	back := user("ann")
	back.IsNegativeHits, back.HitsAddend = true, wrapperspb.UInt64(50)
	resp, err = call(back)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.OverallCode).To(Equal(ratelimitv3.RateLimitResponse_OK))
	g.Expect(resp.Statuses[0].LimitRemaining).To(Equal(uint32(2)))
	admitted := 0
	for range 4 {
		if resp, err = call(user("ann")); err == nil && resp.OverallCode == ratelimitv3.RateLimitResponse_OK {
			admitted++
		}
	}
	g.Expect(admitted).To(Equal(2))

	// an override limits at its own rate
	over := user("bob")
	over.Limit = &ratelimitv3common.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_DAY}
	for i := range 6 {
		resp, err = call(over)
		g.Expect(err).NotTo(HaveOccurred())
		if i < 5 {
			g.Expect(resp.OverallCode).To(Equal(ratelimitv3.RateLimitResponse_OK), "call %d", i)
			g.Expect(headers(resp)).To(HaveKeyWithValue("X-Left", strconv.Itoa(4-i)))
		}
	}
	g.Expect(resp.OverallCode).To(Equal(ratelimitv3.RateLimitResponse_OVER_LIMIT))
	g.Expect(headers(resp)).To(HaveKeyWithValue("RateLimit-Limit", "5"))
}
