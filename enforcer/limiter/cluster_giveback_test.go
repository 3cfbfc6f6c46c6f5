package limiter

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// Units given back while the bucket's slot is moving between shards, its
// two window keys split across the two nodes, are not lost: Redis answers
// the give-back TRYAGAIN (it did not run), and it is sent again until the
// move ends, within its budget, and applied once. A refund, a caller's
// give-back and a lease's return each end with Redis counting exactly the
// units used.
func TestClusterGiveBackDuringSlotMigration(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	const limit = 1000
	windows := []Window{{Requests: limit, Period: exactPeriod}, {Requests: limit, Period: 2 * exactPeriod}}
	cases := map[string]struct {
		leasing config.Leasing
		// giveBack returns what the decisions took and did not use, or
		// the one unit d took
		giveBack func(ctx context.Context, g *Guard, req Request, d Decision) error
		// gives back all: Redis counts nothing once it ran
		all bool
	}{
		"Refund": {config.LeasingOff, func(ctx context.Context, g *Guard, req Request, d Decision) error {
			return g.refund(ctx, []Request{req}, []time.Time{d.CountedAt})
		}, true},
		"GiveBack": {config.LeasingOff, func(ctx context.Context, g *Guard, req Request, _ Decision) error {
			return g.giveBack(ctx, []Request{req}, []int64{1})
		}, true},
		"lease return": {config.LeasingAuto, func(ctx context.Context, g *Guard, _ Request, _ Decision) error {
			g.ReturnLeases(ctx)
			return nil
		}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			// the clock stands still: no lease ends before the test returns it
			guard, clock := newGuardOnFakeClock(t, c.URL())
			b := bucketFor(t)
			rule, err := newRule(b, FixedWindow, windows, 1,
				FailurePolicy{Mode: config.FailClosed, Timeout: 5 * time.Second}, withLeasing(tc.leasing))
			g.Expect(err).NotTo(HaveOccurred())
			req := rule.Request(b.Tenant)
			cc := c.ClusterClient()
			first, second := b.Key(FixedWindow, exactPeriod), b.Key(FixedWindow, 2*exactPeriod)
			d, err := guard.Allow(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Allowed).To(BeTrue())
			used := int64(1)
			if tc.leasing == config.LeasingAuto {
				// a busy bucket, until it leases more than it uses
				for ; cc.HGet(ctx, first, "c").Val() == fmt.Sprint(used) && used < limit/2; used++ {
					clock.advance(time.Millisecond)
					d, err = guard.Allow(ctx, req)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(d.Allowed).To(BeTrue())
				}
				g.Expect(cc.HGet(ctx, first, "c").Int64()).To(BeNumerically(">", used), "the bucket leased")
			}

			slot := int(cc.ClusterKeySlot(ctx, first).Val())
			owner, err := c.SlotOwner(ctx, slot)
			g.Expect(err).NotTo(HaveOccurred())
			m, err := c.StartMigration(ctx, slot, (owner+1)%3)
			g.Expect(err).NotTo(HaveOccurred())
			// the bucket split: one window on each node
			g.Expect(m.Move(ctx, first)).To(Succeed())
			tryAgain := errorStats(ctx, c)["TRYAGAIN"]

			done := make(chan error, 1)
			go func() { done <- tc.giveBack(ctx, guard, req, d) }()
			g.Eventually(func() int64 { return errorStats(ctx, c)["TRYAGAIN"] }).
				WithTimeout(10*time.Second).WithPolling(time.Millisecond).
				Should(BeNumerically(">", tryAgain), "the give-back found the bucket split")
			g.Expect(m.Finish(ctx)).To(Succeed())
			g.Expect(<-done).To(Succeed())

			if tc.all {
				used = 0
			}
			for _, k := range []string{first, second} {
				g.Expect(cc.HGet(ctx, k, "c").Val()).To(Equal(fmt.Sprint(used)),
					"Redis counts the units used in window %s, none given back lost or given back twice", k)
			}
			if tc.leasing == config.LeasingAuto {
				counts := guard.LeaseCounts(b.Policy)
				g.Expect(counts.ReturnFailures.Load()).To(BeZero())
				g.Expect(counts.UnitsLost.Load()).To(BeZero())
			}
		})
	}
}

// Lease returns of many buckets go to Redis in one batch; the one bucket
// split by a slot's move is answered TRYAGAIN while the others run, and it
// is sent again until the move ends: no units are lost, none returned
// twice.
func TestClusterLeaseReturnsBatchedWithASplitBucket(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := redistest.StartCluster(t, 3)
	cc := c.ClusterClient()
	guard, clock := newGuardOnFakeClock(t, c.URL())
	const tenants, limit = 30, 1000
	windows := []Window{{Requests: limit, Period: exactPeriod}, {Requests: limit, Period: 2 * exactPeriod}}
	reqs := make([]Request, tenants)
	used := make([]int64, tenants)
	for i := range reqs {
		b := bucketFor(t)
		b.Tenant = HashTenant("salt", fmt.Sprint(t.Name(), i))
		rule, err := newRule(b, FixedWindow, windows, 1, FailurePolicy{Mode: config.FailClosed, Timeout: 5 * time.Second})
		g.Expect(err).NotTo(HaveOccurred())
		reqs[i] = rule.Request(b.Tenant)
	}
	// every bucket busy at once until each leases more than it uses
	leased := func(i int) bool {
		n, _ := cc.HGet(ctx, reqs[i].Bucket.Key(FixedWindow, exactPeriod), "c").Int64()
		return n > used[i]
	}
	for step := 0; step < limit/2; step++ {
		all := true
		for i, req := range reqs {
			if used[i] > 0 && leased(i) {
				continue
			}
			all = false
			d, err := guard.Allow(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Allowed).To(BeTrue())
			used[i]++
		}
		if all {
			break
		}
		clock.advance(time.Millisecond)
	}
	for i := range reqs {
		g.Expect(leased(i)).To(BeTrue(), "bucket %d leased", i)
	}
	split := reqs[0].Bucket
	first := split.Key(FixedWindow, exactPeriod)
	slot := int(cc.ClusterKeySlot(ctx, first).Val())
	owner, err := c.SlotOwner(ctx, slot)
	g.Expect(err).NotTo(HaveOccurred())
	m, err := c.StartMigration(ctx, slot, (owner+1)%3)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Move(ctx, first)).To(Succeed())
	tryAgain := errorStats(ctx, c)["TRYAGAIN"]

	done := make(chan struct{})
	go func() {
		defer close(done)
		guard.ReturnLeases(ctx)
	}()
	g.Eventually(func() int64 { return errorStats(ctx, c)["TRYAGAIN"] }).
		WithTimeout(10*time.Second).WithPolling(time.Millisecond).
		Should(BeNumerically(">", tryAgain), "the return found the bucket split")
	g.Expect(m.Finish(ctx)).To(Succeed())
	<-done

	counts := guard.LeaseCounts(split.Policy)
	g.Expect(counts.ReturnFailures.Load()).To(BeZero())
	g.Expect(counts.UnitsLost.Load()).To(BeZero())
	for i, req := range reqs {
		for _, p := range []time.Duration{exactPeriod, 2 * exactPeriod} {
			g.Expect(cc.HGet(ctx, req.Bucket.Key(FixedWindow, p), "c").Val()).To(Equal(fmt.Sprint(used[i])),
				"bucket %d: Redis counts the units used in its %s window", i, p)
		}
	}
}

// A Concurrency slot given back while its bucket's slot is moving between
// shards (the source answers ASK for the moved key) is freed in Redis.
func TestClusterSlotGiveBackDuringSlotMigration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := redistest.StartCluster(t, 3)
	cc := c.ClusterClient()
	guard := NewGuard(newRedis(t, c.URL()))
	t.Cleanup(guard.Close)
	b := bucketFor(t)
	rule, err := newRule(b, Concurrency, []Window{{Requests: 2, Period: 10 * time.Second}}, 1,
		FailurePolicy{Mode: config.FailClosed, Timeout: 5 * time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	req := rule.Request(b.Tenant)
	var slots []Admission
	for range 2 {
		d, err := guard.Allow(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Allowed).To(BeTrue())
		slots = append(slots, guard.hold(req, d))
	}
	key := b.Key(Concurrency, 10*time.Second)
	slot := int(cc.ClusterKeySlot(ctx, key).Val())
	owner, err := c.SlotOwner(ctx, slot)
	g.Expect(err).NotTo(HaveOccurred())
	m, err := c.StartMigration(ctx, slot, (owner+1)%3)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Move(ctx, key)).To(Succeed())
	slots[0].Release()
	// freed: the next request is admitted, and holds it
	g.Eventually(func() bool {
		d, err := guard.Allow(ctx, req)
		if err == nil && d.Allowed {
			slots[0] = guard.hold(req, d)
		}
		return d.Allowed
	}).WithTimeout(10 * time.Second).Should(BeTrue())
	g.Expect(m.Finish(ctx)).To(Succeed())
	d, err := guard.Allow(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Allowed).To(BeFalse(), "both slots held again: the give-back ran once")
}

// A Replicated policy's decision that meets ASK (its bucket's keys moved
// to the importing node while the slot's move goes on) follows it: its
// script and WAIT run on one connection to the importing node, and it is
// decided while the move is still in progress, counted once, where the
// slot ends up.
func TestClusterReplicatedDecisionFollowsASK(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := redistest.StartClusterWithReplicas(t, 3)
	cc := c.ClusterClient()
	guard := NewGuard(newRedis(t, c.URL()))
	t.Cleanup(guard.Close)
	b := bucketFor(t)
	windows := []Window{{Requests: 10, Period: exactPeriod}, {Requests: 10, Period: 2 * exactPeriod}}
	rule, err := newRule(b, FixedWindow, windows, 1,
		FailurePolicy{Mode: config.FailClosed, Timeout: time.Second, Replicas: 1, Replicated: true}, withLeasing(config.LeasingOff))
	g.Expect(err).NotTo(HaveOccurred())
	req := rule.Request(b.Tenant)
	allow := func() {
		d, err := guard.Allow(ctx, req)
		g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
		g.ExpectWithOffset(1, d.Degraded).To(BeFalse())
		g.ExpectWithOffset(1, d.Allowed).To(BeTrue())
	}
	allow()
	first, second := b.Key(FixedWindow, exactPeriod), b.Key(FixedWindow, 2*exactPeriod)
	slot := int(cc.ClusterKeySlot(ctx, first).Val())
	owner, err := c.SlotOwner(ctx, slot)
	g.Expect(err).NotTo(HaveOccurred())
	m, err := c.StartMigration(ctx, slot, (owner+1)%3)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Move(ctx, first, second)).To(Succeed())
	asks := errorStats(ctx, c)["ASK"]
	for range 3 {
		allow()
	}
	g.Expect(errorStats(ctx, c)["ASK"]).To(BeNumerically(">", asks), "the decisions met ASK")
	g.Expect(m.Finish(ctx)).To(Succeed())
	for _, k := range []string{first, second} {
		g.Expect(cc.HGet(ctx, k, "c").Val()).To(Equal("4"), "each decision counted once in %s", k)
	}
}
