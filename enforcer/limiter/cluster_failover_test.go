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
	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// A Cluster shard's primary killed under load loses the counts its replica
// had not received, as a Sentinel failover does: an Async policy admits
// them again once the replica is promoted, a Replicated one never counted
// them. The replica is frozen and a large write queued ahead of the
// decisions in the replication stream, so the counts it misses are
// exactly those taken after the freeze; other tenants' decisions run
// meanwhile, and the ones that meet the failover go to the failure mode.
func TestClusterFailoverLosesOnlyUnreplicatedCounts(t *testing.T) {
	const limit, before, during = 100, 40, 10
	for name, tc := range map[string]struct {
		replicated   bool
		wantAdmitted int
	}{
		"Async":      {replicated: false, wantAdmitted: limit + during},
		"Replicated": {replicated: true, wantAdmitted: limit},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			// a replica promoted however long it was away from its primary
			c := redistest.StartClusterWithReplicas(t, 3, redistest.WithArgs("--cluster-replica-validity-factor", "0"))
			guard := NewGuard(newRedis(t, c.URL()))
			t.Cleanup(guard.Close)
			req := replicatedRequest(t, limit, config.FailClosed, tc.replicated)
			rule, err := newRule(req.Bucket, FixedWindow, req.Windows, 1, req.Failure, withLeasing(config.LeasingOff))
			g.Expect(err).NotTo(HaveOccurred())
			req = rule.Request(req.Bucket.Tenant)
			key := req.Bucket.Key(FixedWindow, exactPeriod)
			cc := c.ClusterClient()
			owner, err := c.SlotOwner(ctx, int(cc.ClusterKeySlot(ctx, key).Val()))
			g.Expect(err).NotTo(HaveOccurred())
			primary, replica := c.Nodes()[owner], c.Replicas()[owner]

			load := startClusterLoad(t, guard, 8)

			admitted := 0
			decide := func() (bool, error) {
				d, err := guard.Allow(ctx, req)
				if err == nil && d.Allowed {
					admitted++
				}
				return d.Allowed, err
			}
			for range before {
				ok, err := decide()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ok).To(BeTrue())
			}
			// a cluster replica answers reads on a READONLY connection
			replicaReads := redis.NewClient(&redis.Options{Addr: replica.Addr(), MaxRetries: -1,
				OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }})
			t.Cleanup(func() { _ = replicaReads.Close() })
			g.Eventually(func() string { return replicaReads.HGet(ctx, key, "c").Val() }, 10*time.Second, 10*time.Millisecond).
				Should(Equal(strconv.Itoa(before)), "the replica has the counts taken before the freeze")

			// The frozen replica reads nothing: a write larger than the
			// sockets' buffers keeps what follows it in the primary's
			// memory, which the kill loses.
			replica.Freeze()
			t.Cleanup(replica.Thaw)
			junk := fmt.Sprintf("{%s}junk", strings.Split(strings.Split(key, "{")[1], "}")[0])
			g.Expect(primary.Client().Set(ctx, junk, strings.Repeat("x", 32<<20), time.Minute).Err()).To(Succeed())
			for range during {
				_, _ = decide() // Async counts on the primary alone; Replicated waits for an ack that never comes
			}
			primary.Stop()
			replica.Thaw()

			// The other primaries mark the dead one failed after the node
			// timeout and elect its replica.
			g.Eventually(func() string {
				info, _ := replica.Client().Info(ctx, "replication").Result()
				return info
			}, 60*time.Second, 100*time.Millisecond).Should(ContainSubstring("role:master"), "the replica is promoted")
			promoted := time.Now()
			// The old primary comes back empty and, its epoch behind, joins
			// as the new one's replica: a Replicated policy counts again.
			g.Expect(primary.Restart()).To(Succeed())

			deadline := time.Now().Add(90 * time.Second)
			for refused := false; !refused; {
				g.Expect(time.Now().Before(deadline)).To(BeTrue(), "no refusal within 90s of the failover; %d admitted", admitted)
				ok, err := decide()
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				refused = !ok
			}
			decided, failed := load.stop()
			t.Logf("%s: refused again %s after the promotion", name, time.Since(promoted).Round(time.Millisecond))
			t.Logf("%s: %d admitted against a limit of %d across the failover (%d counted after the freeze); other tenants: %d of %d decisions went to the failure mode",
				name, admitted, limit, during, failed, decided)
			if tc.replicated {
				g.Expect(admitted).To(BeNumerically("<=", limit))
				g.Expect(admitted).To(BeNumerically(">", before), "it counts again once the new primary has a replica")
				return
			}
			g.Expect(admitted).To(Equal(tc.wantAdmitted))
		})
	}
}

// clusterLoad is decisions of other tenants running through a test.
type clusterLoad struct {
	stopped         chan struct{}
	wg              sync.WaitGroup
	decided, failed atomic.Int64
}

// startClusterLoad runs workers deciding for tenants of their own, never
// reaching their limit, until stop.
func startClusterLoad(t *testing.T, guard *Guard, workers int) *clusterLoad {
	l := &clusterLoad{stopped: make(chan struct{})}
	failure := FailurePolicy{Mode: config.FailOpen, Timeout: 200 * time.Millisecond, Replicas: 1}
	for w := range workers {
		b := bucketFor(t)
		b.Rule = "load"
		b.Tenant = HashTenant("load", t.Name()+strconv.Itoa(w))
		rule, err := newRule(b, FixedWindow, []Window{{Requests: 1 << 40, Period: time.Hour}}, 1, failure, withLeasing(config.LeasingOff))
		if err != nil {
			t.Fatal(err)
		}
		req := rule.Request(b.Tenant)
		l.wg.Go(func() {
			for {
				select {
				case <-l.stopped:
					return
				default:
				}
				_, err := guard.Allow(context.Background(), req)
				l.decided.Add(1)
				if err != nil {
					l.failed.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	t.Cleanup(func() { l.stop() })
	return l
}

// stop ends the load and reports its decisions and those that went to
// the failure mode.
func (l *clusterLoad) stop() (decided, failed int64) {
	select {
	case <-l.stopped:
	default:
		close(l.stopped)
	}
	l.wg.Wait()
	return l.decided.Load(), l.failed.Load()
}
