package limiter

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// Moving the slots of tenants from one shard to another while decisions
// run is invisible to them: go-redis follows the ASK, MOVED and TRYAGAIN
// answers of the migration, no decision fails or goes to the failure mode,
// and every tenant is admitted exactly its limit, no more, as Redis counted.
// Each bucket has two windows, two keys of one slot, which the migration
// moves one at a time: a decision in between finds them split across two
// nodes and gets TRYAGAIN.
//
// A Replicated policy's decisions (script and WAIT on one connection) follow
// ASK the same way, to the importing node's connection.
func TestClusterSlotMigrationUnderLoad(t *testing.T) {
	for name, replicated := range map[string]bool{"Async": false, "Replicated": true} {
		t.Run(name, func(t *testing.T) { testClusterSlotMigrationUnderLoad(t, replicated) })
	}
}

func testClusterSlotMigrationUnderLoad(t *testing.T, replicated bool) {
	const tenants, workers, limit, rounds = 6, 16, 1000, 2
	g := NewWithT(t)
	ctx := context.Background()
	var c *redistest.Cluster
	if replicated {
		c = redistest.StartClusterWithReplicas(t, 3)
	} else {
		c = redistest.StartCluster(t, 3)
	}
	guard := NewGuard(newRedis(t, c.URL()))
	t.Cleanup(guard.Close)
	// Closed: a decision that failed would be refused, and the refusals
	// would hide nothing, for errors are counted apart.
	failure := FailurePolicy{Mode: config.FailClosed, Timeout: time.Second, Replicas: 1, Replicated: replicated}
	reqs := make([]Request, tenants)
	slots := make([]int, tenants)
	for i := range reqs {
		b := bucketFor(t)
		b.Tenant = HashTenant("salt", t.Name()+strconv.Itoa(i))
		// every decision a script call: leases would hide the migration
		rule, err := newRule(b, FixedWindow, []Window{{Requests: limit, Period: exactPeriod}, {Requests: limit, Period: 2 * exactPeriod}},
			1, failure, withLeasing(config.LeasingOff))
		g.Expect(err).NotTo(HaveOccurred())
		reqs[i] = rule.Request(b.Tenant)
		slots[i] = int(c.ClusterClient().ClusterKeySlot(ctx, b.Key(FixedWindow, exactPeriod)).Val())
	}

	var admitted [tenants]atomic.Int64
	var decided, failed, degraded atomic.Int64
	var lastErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for n := w; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				i := n % tenants
				d, err := guard.Allow(ctx, reqs[i])
				decided.Add(1)
				switch {
				case err != nil:
					failed.Add(1)
					lastErr.Store(err.Error())
				case d.Degraded:
					degraded.Add(1)
				case d.Allowed:
					admitted[i].Add(1)
				}
				// paced, so that the limit lasts through the migrations
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	migrations := 0
	for round := range rounds {
		for i, slot := range slots {
			owner, err := c.SlotOwner(ctx, slot)
			g.Expect(err).NotTo(HaveOccurred())
			// one key at a time, with a pause for decisions to find the
			// bucket split
			g.Expect(c.MigrateSlot(ctx, slot, (owner+1+round)%3, 1, 20*time.Millisecond)).To(Succeed(), "tenant %d", i)
			migrations++
		}
	}
	var sum int64
	for i := range admitted {
		sum += admitted[i].Load()
	}
	g.Expect(sum).To(BeNumerically("<", tenants*limit), "the limits lasted through the migrations")
	redirects := errorStats(ctx, c)
	t.Logf("replies of the migration: %v", redirects)
	g.Expect(redirects).To(HaveKeyWithValue("TRYAGAIN", BeNumerically(">", 0)), "decisions found buckets split")
	g.Expect(redirects).To(HaveKeyWithValue("ASK", BeNumerically(">", 0)), "decisions were sent to the importing node")
	// every tenant reaches its limit, or decisions keep failing
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var sum int64
		for i := range admitted {
			sum += admitted[i].Load()
		}
		if sum >= tenants*limit {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // decisions past the limit
	close(stop)
	wg.Wait()

	t.Logf("%d decisions across %d slot migrations: %d failed, %d degraded", decided.Load(), migrations, failed.Load(), degraded.Load())
	cc := c.ClusterClient()
	for i := range reqs {
		t.Logf("tenant %d: admitted %d, counted %s", i, admitted[i].Load(), cc.HGet(ctx, reqs[i].Bucket.Key(FixedWindow, 2*exactPeriod), "c").Val())
	}
	g.Expect(failed.Load()).To(BeZero(), "a decision failed during the migration: %v", lastErr.Load())
	g.Expect(degraded.Load()).To(BeZero())
	g.Expect(guard.Health().ConsecutiveFailures).To(BeZero())
	g.Expect(guard.Health().LastError).To(BeEmpty(), "the guard saw no Redis failure")
	for i := range reqs {
		g.Expect(admitted[i].Load()).To(BeEquivalentTo(limit), "tenant %d admitted its limit exactly", i)
		for _, p := range []time.Duration{exactPeriod, 2 * exactPeriod} {
			g.Expect(cc.HGet(ctx, reqs[i].Bucket.Key(FixedWindow, p), "c").Val()).To(Equal(fmt.Sprint(limit)),
				"tenant %d: Redis counted each admission once in its %s window", i, p)
		}
	}
}

// errorStats sums the error replies of the cluster's nodes by kind (INFO
// errorstats: TRYAGAIN, ASK, MOVED...).
func errorStats(ctx context.Context, c *redistest.Cluster) map[string]int64 {
	out := map[string]int64{}
	for _, n := range c.Nodes() {
		info := n.Client().Info(ctx, "errorstats").Val()
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":count=")
			if !ok {
				continue
			}
			v, _ := strconv.ParseInt(rest, 10, 64)
			out[strings.TrimPrefix(name, "errorstat_")] += v
		}
	}
	return out
}
