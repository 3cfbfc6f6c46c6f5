//go:build scale

package scale

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rollout is what admitting 1,000 pods costs.
type rollout struct {
	plainP50, plainP99       time.Duration
	injectedP50, injectedP99 time.Duration
	webhookP99               float64
	webhookCalls             uint64
	converge                 time.Duration
}

// failover is the leader killed during a rollout and during an edit.
type failover struct {
	rolloutRefused         int
	rolloutNewLeader       time.Duration
	rolloutConverged       time.Duration
	editNewLeader          time.Duration
	editApplied, editReady time.Duration
}

// measureRollout times 1,000 pod creations in a namespace without
// injection, then replaces 1,000 pods of the scale namespaces (a rollout:
// new pods, the old ones deleted), read from the webhook's own histogram
// and from the create calls.
func (c *cluster) measureRollout(ctx context.Context, total int) rollout {
	t := c.t
	var out rollout
	if err := c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: plainNamespace}}); err != nil {
		t.Fatal(err)
	}
	plain := make([]*corev1.Pod, min(rolloutPods, total))
	for i := range plain {
		plain[i] = appPod(i, "")
		plain[i].Namespace = plainNamespace
	}
	d, _, err := c.createPods(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	out.plainP50, out.plainP99 = quantile(d, 0.5), quantile(d, 0.99)
	if err := c.deletePods(ctx, plain); err != nil {
		t.Fatal(err)
	}

	before := c.webhookHistogram()
	d, _, err = c.replace(ctx, total, "", "-r1")
	if err != nil {
		t.Fatal(err)
	}
	h := c.webhookHistogram().minus(before)
	out.injectedP50, out.injectedP99 = quantile(d, 0.5), quantile(d, 0.99)
	out.webhookP99, out.webhookCalls = h.quantile(0.99), h.total
	if out.converge, err = c.waitConverged(ctx, total); err != nil {
		t.Fatal(err)
	}
	c.expectInjected(ctx, total)
	return out
}

// replace deletes the last rolloutPods pods named with suffix old and
// creates them again with suffix next.
func (c *cluster) replace(ctx context.Context, total int, old, next string) ([]time.Duration, int, error) {
	var gone, pods []*corev1.Pod
	for i := max(total-rolloutPods, 0); i < total; i++ {
		gone = append(gone, appPod(i, old))
		pods = append(pods, appPod(i, next))
	}
	d, refused, err := c.createPods(ctx, pods)
	if err != nil {
		return nil, refused, err
	}
	return d, refused, c.deletePods(ctx, gone)
}

// measureFailover kills the leader (SIGKILL) two seconds into a rollout,
// and right after a policy edit, and checks that no pod went without its
// enforcer, the edit reached every enforcer and the status converged.
func (c *cluster) measureFailover(ctx context.Context, total int) failover {
	t := c.t
	var out failover

	var wg sync.WaitGroup
	var refused int
	var rolloutErr error
	wg.Go(func() { _, refused, rolloutErr = c.replace(ctx, total, "-r1", "-r2") })
	time.Sleep(2 * time.Second)
	newLeader, killedAt := c.killLeader(ctx)
	out.rolloutNewLeader = newLeader.Sub(killedAt)
	wg.Wait()
	if rolloutErr != nil {
		t.Fatal(rolloutErr)
	}
	out.rolloutRefused = refused
	c.expectInjected(ctx, total)
	if _, err := c.waitConverged(ctx, total); err != nil {
		t.Fatal(err)
	}
	out.rolloutConverged = time.Since(newLeader)
	c.restartStopped(ctx)

	ns, name := namespaceName(1), policyName(1)
	gen, start := c.edit(ctx, ns, name)
	newLeader, killedAt = c.killLeader(ctx)
	out.editNewLeader = newLeader.Sub(killedAt)
	if err := c.waitApplied(ctx, ns, name, gen); err != nil {
		t.Fatal(err)
	}
	out.editApplied = time.Since(start)
	if _, err := c.waitConverged(ctx, total); err != nil {
		t.Fatal(err)
	}
	out.editReady = time.Since(newLeader)
	c.restartStopped(ctx)
	return out
}

// killLeader kills the leading replica and returns when it was killed and
// when another one led.
func (c *cluster) killLeader(ctx context.Context) (newLeader, killedAt time.Time) {
	old, err := c.leader(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	old.proc.Kill()
	killedAt = time.Now()
	<-old.proc.Exited()
	if _, err := c.leaderOtherThan(ctx, old); err != nil {
		c.t.Fatal(err)
	}
	return time.Now(), killedAt
}

// restartStopped waits until every replica runs again and is ready.
func (c *cluster) restartStopped(ctx context.Context) {
	for _, r := range c.replicas {
		for !r.running() {
			time.Sleep(100 * time.Millisecond)
		}
		if err := r.waitReady(ctx); err != nil {
			c.t.Fatal(err)
		}
	}
}

// leaderOtherThan waits until a replica other than old leads.
func (c *cluster) leaderOtherThan(ctx context.Context, old *replica) (*replica, error) {
	for {
		for _, r := range c.replicas {
			if r != old && r.leading() {
				return r, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no other manager leads: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// webhookHistogram adds up the injection webhook's latency histogram of
// every running replica.
func (c *cluster) webhookHistogram() histogram {
	var sum histogram
	for _, r := range c.replicas {
		if !r.running() {
			continue
		}
		mf, err := r.scrape()
		if err != nil {
			c.t.Fatal(err)
		}
		h := histogramOf(mf["controller_runtime_webhook_latency_seconds"], map[string]string{"webhook": webhookPath})
		if h.bounds == nil {
			continue // it served no call yet
		}
		if sum.bounds == nil {
			sum = h
			continue
		}
		for i := range sum.counts {
			sum.counts[i] += h.counts[i]
		}
		sum.total += h.total
	}
	return sum
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// report is the suite's figures as docs/performance.md shows them.
func report(rows []steady, r rollout, f failover) string {
	var b strings.Builder
	b.WriteString("| pods | leader CPU (cores) | leader RSS (MiB) | follower CPU / RSS | API requests/s (leader, follower) | policy writes in a quiet minute | converged after the last create | edit applied by every enforcer | edit Ready | load (1, 5, 15 min) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range rows {
		fmt.Fprintf(&b, "| %d | %.3f | %.0f | %.3f / %.0f MiB | %.1f, %.1f | %d (over %s) | %s | %s | %s | %s |\n",
			s.pods, s.leaderCores, s.rssMiB, s.followerCores, s.followerRSS, s.requestsPerSecond, s.followerRequestsPerS,
			s.statusWrites, s.window.Round(time.Second), s.converge.Round(100*time.Millisecond),
			s.editApplied.Round(10*time.Millisecond), s.editReady.Round(100*time.Millisecond), s.load)
	}
	fmt.Fprintf(&b, "\nRollout of %d pods: create p50/p99 %s/%s without injection, %s/%s with it; the webhook's own p99 ≤ %gs over %d calls; status converged %s after the last create.\n",
		rolloutPods, r.plainP50.Round(100*time.Microsecond), r.plainP99.Round(100*time.Microsecond),
		r.injectedP50.Round(100*time.Microsecond), r.injectedP99.Round(100*time.Microsecond), r.webhookP99, r.webhookCalls,
		r.converge.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "Leader killed during a rollout: new leader after %s, %d create calls refused and retried, status converged %s after the new leader.\n",
		f.rolloutNewLeader.Round(100*time.Millisecond), f.rolloutRefused, f.rolloutConverged.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "Leader killed right after an edit: new leader after %s, edit applied by every enforcer %s after the write, status Ready %s after the new leader.\n",
		f.editNewLeader.Round(100*time.Millisecond), f.editApplied.Round(100*time.Millisecond), f.editReady.Round(100*time.Millisecond))
	return b.String()
}
