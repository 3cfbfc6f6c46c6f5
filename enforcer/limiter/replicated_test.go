package limiter

import (
	"context"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// replicatedRequest is a fixed window of limit per hour for the running
// test, on a Replicated policy with failure mode mode.
// exactPeriod is the window of the tests that count admissions exactly
// across failovers and migrations: long enough that no run crosses one of
// its boundaries (an hour's window did, at the hour, and started afresh).
const exactPeriod = 1000 * time.Hour

func replicatedRequest(t *testing.T, limit int64, mode config.FailureMode, replicated bool) Request {
	return Request{Bucket: bucketFor(t), Algorithm: FixedWindow, Cost: 1,
		Windows: []Window{{Requests: limit, Period: exactPeriod}},
		Failure: FailurePolicy{Mode: mode, Timeout: time.Second, Replicas: 1, Replicated: replicated}}
}

// A Replicated decision is answered once the replica has its count; with
// the replica gone silent it is a Redis failure, which the failure mode
// decides, while an Async decision is answered from the primary alone.
func TestReplicatedDecisionWaitsForTheReplica(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary.Addr())
	r := newRedis(t, primary.URL())

	req := replicatedRequest(t, 5, config.FailClosed, true)
	key := req.Bucket.Key(FixedWindow, exactPeriod)
	for i := 1; i <= 3; i++ {
		d, err := r.Allow(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Allowed).To(BeTrue())
		g.Expect(replica.Client().HGet(ctx, key, "c").Val()).To(Equal(strconv.Itoa(i)), "the replica had the count when the decision was answered")
	}

	replica.Freeze()
	t.Cleanup(replica.Thaw)
	_, err := r.Allow(ctx, req)
	g.Expect(err).To(MatchError(ErrNotReplicated))

	async := replicatedRequest(t, 5, config.FailClosed, false)
	async.Bucket.Rule = "async"
	d, err := r.Allow(ctx, async)
	g.Expect(err).NotTo(HaveOccurred(), "an Async policy does not wait")
	g.Expect(d.Allowed).To(BeTrue())

	// Through the guard, the failure mode decides and the reason is kept.
	guard := NewGuard(r)
	t.Cleanup(guard.Close)
	d, err = guard.Allow(ctx, req)
	g.Expect(err).To(MatchError(ErrNotReplicated))
	g.Expect(d.Allowed).To(BeFalse(), "Closed refuses what could not be counted safely")
	g.Expect(d.Degraded).To(BeTrue())
	g.Expect(guard.Health().LastError).To(ContainSubstring("no replica acknowledged the count"))
}

// A Replicated policy on a Redis without a replica cannot count: every
// decision is a failure, which its status then shows.
func TestReplicatedWithoutAReplicaFails(t *testing.T) {
	g := NewWithT(t)
	r := newRedis(t, standalone.URL())
	_, err := r.Allow(context.Background(), replicatedRequest(t, 5, config.FailOpen, true))
	g.Expect(err).To(MatchError(ErrNotReplicated))
}

// In a cluster the WAIT goes to the primary of the decision's slot, on the
// connection that carried its write.
func TestReplicatedDecisionInACluster(t *testing.T) {
	g := NewWithT(t)
	r := newRedis(t, cluster.URL())
	_, err := r.Allow(context.Background(), replicatedRequest(t, 5, config.FailClosed, true))
	g.Expect(err).To(MatchError(ErrNotReplicated), "the package's cluster has no replicas: the WAIT reached a primary and found none")
}

// A Concurrency rule of a Replicated policy takes its slots once a replica
// has them too: a take no replica acknowledged is a Redis failure, as a
// window's count is. Renewals and give-backs are not waited for
// (docs/algorithms.md, When Redis fails over).
func TestReplicatedSlotTakeWaitsForTheReplica(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary.Addr())
	guard := NewGuard(newRedis(t, primary.URL()))
	t.Cleanup(guard.Close)
	req := mustCheck(t, Request{Bucket: bucketFor(t), Algorithm: Concurrency, Cost: 1,
		Windows: []Window{ConcurrencyWindow(3)},
		Failure: FailurePolicy{Mode: config.FailClosed, Timeout: time.Second, Replicas: 1, Replicated: true}})
	key := req.Bucket.Key(Concurrency, SlotExpiry)

	d, err := guard.Allow(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Allowed).To(BeTrue())
	slot := guard.hold(req, d)
	t.Cleanup(func() { slot.Release() })
	g.Expect(replica.Client().HGet(ctx, key, "c|"+EnforcerID()).Val()).To(Equal("1"), "the replica had the slot when the take was answered")

	replica.Freeze()
	t.Cleanup(replica.Thaw)
	d, err = guard.Allow(ctx, req)
	g.Expect(err).To(MatchError(ErrNotReplicated))
	g.Expect(d.Allowed).To(BeFalse(), "Closed refuses a slot no replica has")
}
