package limiter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// replicationLink is a TCP proxy between a replica and its primary that
// can cut the replication stream: once cut, what the primary sends is
// dropped, as a network partition or a lagging link would lose it when
// the primary dies.
type replicationLink struct {
	ln  net.Listener
	cut atomic.Bool
	wg  sync.WaitGroup
}

func newReplicationLink(t *testing.T, primary string) *replicationLink {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &replicationLink{ln: ln}
	t.Cleanup(func() { _ = ln.Close(); l.wg.Wait() })
	l.wg.Go(func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", primary)
			if err != nil {
				_ = down.Close()
				continue
			}
			l.wg.Go(func() { _, _ = io.Copy(up, down); _ = up.Close() })
			l.wg.Go(func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := up.Read(buf)
					if n > 0 && !l.cut.Load() {
						if _, werr := down.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				_ = down.Close()
			})
		}
	})
	return l
}

// A Sentinel failover loses the counts the replica had not received: an
// Async policy admits them again after it, a Replicated one never counted
// them. The replication stream is cut while the primary takes counts,
// then the primary is killed and the replica promoted, so the counts it
// misses are exactly those taken after the cut.
func TestFailoverLosesOnlyUnreplicatedCounts(t *testing.T) {
	const limit, before, during = 100, 40, 10
	for name, tc := range map[string]struct {
		replicated   bool
		wantAdmitted int
	}{
		// the counts taken after the cut are admitted again
		"Async": {replicated: false, wantAdmitted: limit + during},
		// never over; under while no replica acknowledged (the counts
		// stay on the primary of the refused decisions)
		"Replicated": {replicated: true, wantAdmitted: limit},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			primary := redistest.Start(t)
			link := newReplicationLink(t, primary.Addr())
			replica := redistest.StartReplica(t, link.ln.Addr().String())
			sentinels := redistest.StartSentinels(t, primary, "main", 3, 2, 500*time.Millisecond)
			url := fmt.Sprintf("redis+sentinel://%s?master_name=main&addr=%s&addr=%s", sentinels[0].Addr(), sentinels[1].Addr(), sentinels[2].Addr())
			r := newRedis(t, url)
			req := replicatedRequest(t, limit, config.FailClosed, tc.replicated)
			key := req.Bucket.Key(FixedWindow, exactPeriod)

			admitted := 0
			decide := func() (bool, error) {
				d, err := r.Allow(ctx, req)
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
			g.Eventually(func() string { return replica.Client().HGet(ctx, key, "c").Val() }, 10*time.Second, 10*time.Millisecond).
				Should(Equal(fmt.Sprint(before)), "the replica has the counts taken before the cut")

			link.cut.Store(true)
			for range during {
				_, _ = decide() // Async counts on the primary alone; Replicated waits for an ack that never comes
			}
			primary.Stop()

			// The Sentinels promote the replica, and make the old primary,
			// back and empty, its replica: a Replicated policy counts again
			// once the new primary has one.
			_, replicaPort, _ := net.SplitHostPort(replica.Addr())
			for _, s := range sentinels {
				g.Eventually(func() []string {
					addr, _ := s.Client().Do(ctx, "SENTINEL", "get-master-addr-by-name", "main").StringSlice()
					return addr
				}, 60*time.Second, 100*time.Millisecond).Should(Equal([]string{"127.0.0.1", replicaPort}), "the Sentinels promote the replica")
			}
			// The client reaches the new primary before the old one comes
			// back on the same port, empty and a primary until the Sentinels
			// turn it into a replica: a decision runs there (a Replicated one
			// finds no replica yet).
			g.Eventually(func() error {
				_, err := decide()
				if errors.Is(err, ErrNotReplicated) {
					return nil
				}
				return err
			}, 60*time.Second, 50*time.Millisecond).Should(Succeed(), "the client reaches the promoted replica")
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
			t.Logf("%s: %d admitted against a limit of %d across the failover (%d counted after the replication stream was cut)", name, admitted, limit, during)
			if tc.replicated {
				g.Expect(admitted).To(BeNumerically("<=", limit))
				g.Expect(admitted).To(BeNumerically(">", before), "it counts again once the new primary has a replica")
				return
			}
			g.Expect(admitted).To(Equal(tc.wantAdmitted))
		})
	}
}
