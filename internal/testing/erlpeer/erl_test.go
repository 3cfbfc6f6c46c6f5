package erlpeer_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/erlpeer"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

const threePerMinute = `domain: peer
descriptors:
  - key: generic_key
    value: three-per-minute
    rate_limit:
      unit: minute
      requests_per_unit: 3
`

// TestShouldRateLimit runs the real ERL and checks the answers a caller of
// the rate limit service sees: three calls pass, the fourth is over the
// limit, each with the remaining count of the minute.
func TestShouldRateLimit(t *testing.T) {
	g := NewWithT(t)
	redis := redistest.Start(t)
	configDir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(configDir, "peer.yaml"), []byte(threePerMinute), 0o644)).To(Succeed())

	peer := erlpeer.Start(t, redis.Addr(), configDir)
	g.Expect(peer.Config()).To(ContainSubstring("peer.generic_key_three-per-minute: unit=MINUTE requests_per_unit=3"))
	client, err := peer.Client()
	g.Expect(err).NotTo(HaveOccurred())

	// ERL counts in fixed windows of the wall clock: four calls that
	// straddled a minute would count in two windows.
	if left := time.Minute - time.Duration(time.Now().UnixNano())%time.Minute; left < 5*time.Second {
		time.Sleep(left)
	}
	req := &rlsv3.RateLimitRequest{
		Domain: "peer",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "three-per-minute"}},
		}},
	}
	want := []struct {
		code      rlsv3.RateLimitResponse_Code
		remaining uint32
	}{
		{rlsv3.RateLimitResponse_OK, 2},
		{rlsv3.RateLimitResponse_OK, 1},
		{rlsv3.RateLimitResponse_OK, 0},
		{rlsv3.RateLimitResponse_OVER_LIMIT, 0},
	}
	for i, w := range want {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := client.ShouldRateLimit(ctx, req)
		cancel()
		g.Expect(err).NotTo(HaveOccurred(), "call %d", i+1)
		g.Expect(resp.GetOverallCode()).To(Equal(w.code), "call %d", i+1)
		g.Expect(resp.GetStatuses()).To(HaveLen(1), "call %d", i+1)
		status := resp.GetStatuses()[0]
		g.Expect(status.GetCode()).To(Equal(w.code), "call %d", i+1)
		g.Expect(status.GetLimitRemaining()).To(Equal(w.remaining), "call %d", i+1)
		g.Expect(status.GetCurrentLimit().GetRequestsPerUnit()).To(Equal(uint32(3)), "call %d", i+1)
		g.Expect(status.GetCurrentLimit().GetUnit()).To(Equal(rlsv3.RateLimitResponse_RateLimit_MINUTE), "call %d", i+1)
		g.Expect(status.GetDurationUntilReset().AsDuration()).To(And(BeNumerically(">", 0), BeNumerically("<=", time.Minute)), "call %d", i+1)
	}

	// A descriptor the configuration does not name is not limited.
	resp, err := client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
		Domain: "peer",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "unnamed"}},
		}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.GetOverallCode()).To(Equal(rlsv3.RateLimitResponse_OK))
	g.Expect(resp.GetStatuses()[0].GetCurrentLimit()).To(BeNil())
	g.Expect(resp.GetResponseHeadersToAdd()).To(BeEmpty(), "ERL adds no headers unless told to")
}

// TestCloseStopsTheProcess checks that a closed server is gone, so that no
// ERL outlives the test that started it.
func TestCloseStopsTheProcess(t *testing.T) {
	g := NewWithT(t)
	redis := redistest.Start(t)
	peer, err := erlpeer.New(redis.Addr(), t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	pid := peer.Pid()
	peer.Close()
	g.Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH))
	peer.Close() // a second Close does nothing
}

// TestMissingBinary checks the one-line error that says how to build ERL.
func TestMissingBinary(t *testing.T) {
	g := NewWithT(t)
	_, err := erlpeer.New("127.0.0.1:1", t.TempDir(), erlpeer.WithRoot(t.TempDir()))
	g.Expect(err).To(MatchError(ContainSubstring("run make erl")))
	g.Expect(err.Error()).NotTo(ContainSubstring("\n"))
}
