//go:build scale

// Package scale measures Sluice's control plane as a cluster grows: a real
// kube-apiserver and etcd, pods run by kwok (no kubelet: their IPs in
// 127.252.0.0/16), their enforcers simulated by one process (this test's:
// internal/testing/fleet, the enforcer's own reload, admin and status
// code), and three sluice-manager processes with leader election and the
// injection webhook (failurePolicy Fail). It reports figures, and fails
// only on what a user would see as wrong: a pod created without its
// enforcer, an edit that never reaches the enforcers, a status that never
// converges or that is written while nothing changes.
//
//	make test-scale                 # 100, 1,000 and 10,000 pods
//	SCALE_PODS=100,1000 SCALE_QUIET=20s make test-scale
package scale

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

const (
	suiteTimeout = 75 * time.Minute
	rolloutPods  = 1000
	webhookPath  = "/inject-v1-pod"
)

// steady is what the manager costs at one size, over a quiet window.
type steady struct {
	pods                   int
	converge               time.Duration
	window                 time.Duration
	leaderCores            float64
	followerCores          float64
	rssMiB, followerRSS    float64
	requestsPerSecond      float64
	followerRequestsPerS   float64
	statusWrites           int64
	editApplied, editReady time.Duration
	load                   string
}

func TestScale(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer cancel()
	steps := envSizes(t)
	quiet := envDuration(t, "SCALE_QUIET", time.Minute)
	ctrllog.SetLogger(logr.Discard())
	c := startCluster(ctx, t, steps[len(steps)-1])

	var rows []steady
	created := 0
	for _, n := range steps {
		pods := make([]*corev1.Pod, 0, n-created)
		for i := created; i < n; i++ {
			pods = append(pods, appPod(i, ""))
		}
		t.Logf("%d pods: creating %d", n, len(pods))
		if _, _, err := c.createPods(ctx, pods); err != nil {
			t.Fatal(err)
		}
		created = n
		converge, err := c.waitConverged(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		c.expectInjected(ctx, n)
		t.Logf("%d pods: converged %s after the last create", n, converge.Round(time.Second))
		row := c.measureSteady(ctx, n, quiet)
		row.converge = converge
		row.editApplied, row.editReady = c.measureEdit(ctx, namespaceName(0), policyName(0), n)
		t.Logf("%d pods: %+v", n, row)
		rows = append(rows, row)
	}

	roll := c.measureRollout(ctx, created)
	t.Logf("rollout: %+v", roll)
	fo := c.measureFailover(ctx, created)
	t.Logf("failover: %+v", fo)
	t.Logf("replicas started again after exiting (killed, or a lost lease): %d", c.restarts.Load())
	t.Log("\n" + report(rows, roll, fo))
}

// measureSteady waits for the status to settle, then watches a quiet
// window: the leader's CPU and RSS, the requests every manager sends the
// API server, and the policies written.
func (c *cluster) measureSteady(ctx context.Context, pods int, window time.Duration) steady {
	t := c.t
	// A poll pass or two after convergence: the status stops moving.
	time.Sleep(15 * time.Second)
	leader, err := c.leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type sample struct {
		cpu  float64
		reqs float64
	}
	take := func() map[*replica]sample {
		out := map[*replica]sample{}
		for _, r := range c.replicas {
			cpu, err := r.cpuSeconds()
			if err != nil {
				t.Fatal(err)
			}
			mf, err := r.scrape()
			if err != nil {
				t.Fatal(err)
			}
			out[r] = sample{cpu: cpu, reqs: sumOf(mf["rest_client_requests_total"], nil)}
		}
		return out
	}
	load0 := loadavg()
	writes0 := c.policyWrites.Load()
	before := take()
	start := time.Now()
	var rss, followerRSS int64
	for time.Since(start) < window {
		time.Sleep(min(5*time.Second, window-time.Since(start)))
		for _, r := range c.replicas {
			b, err := r.rssBytes()
			if err != nil {
				t.Fatal(err)
			}
			if r == leader {
				rss = max(rss, b)
			} else {
				followerRSS = max(followerRSS, b)
			}
		}
	}
	after := take()
	elapsed := time.Since(start)
	writes := c.policyWrites.Load() - writes0
	if !leader.leading() {
		t.Logf("%d pods: the leader changed during the quiet window: its figures are of the part it led", pods)
	}
	s := steady{pods: pods, window: elapsed, rssMiB: float64(rss) / (1 << 20), followerRSS: float64(followerRSS) / (1 << 20),
		statusWrites: writes, load: load0 + " → " + loadavg()}
	for _, r := range c.replicas {
		cpu := (after[r].cpu - before[r].cpu) / elapsed.Seconds()
		reqs := (after[r].reqs - before[r].reqs) / elapsed.Seconds()
		if r == leader {
			s.leaderCores, s.requestsPerSecond = cpu, reqs
		} else {
			s.followerCores = max(s.followerCores, cpu)
			s.followerRequestsPerS = max(s.followerRequestsPerS, reqs)
		}
	}
	if writes != 0 {
		t.Errorf("%d pods: %d policy writes over a quiet %s: the status must be written only when it changes", pods, writes, elapsed.Round(time.Second))
	}
	return s
}

// measureEdit changes one policy's limit and times its way to every
// enforcer of the namespace, then to its Ready condition at the new
// generation.
func (c *cluster) measureEdit(ctx context.Context, ns, name string, pods int) (applied, ready time.Duration) {
	t := c.t
	gen, start := c.edit(ctx, ns, name)
	if err := c.waitApplied(ctx, ns, name, gen); err != nil {
		t.Fatal(err)
	}
	applied = time.Since(start)
	if _, err := c.waitConverged(ctx, pods); err != nil {
		t.Fatal(err)
	}
	return applied, time.Since(start)
}

// edit raises the policy's limit by one request and returns its new
// generation and when it was written.
func (c *cluster) edit(ctx context.Context, ns, name string) (int64, time.Time) {
	var p v1alpha1.RateLimitPolicy
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		c.t.Fatal(err)
	}
	p.Spec.Rules[0].Limits[0].Requests++
	start := time.Now()
	if err := c.client.Update(ctx, &p); err != nil {
		c.t.Fatal(err)
	}
	return p.Generation, start
}

// waitApplied waits until the fleet holds the policy's generation gen in
// the namespace's configuration and every enforcer of the namespace
// serves it.
func (c *cluster) waitApplied(ctx context.Context, ns, name string, gen int64) error {
	for c.fleet.PolicyGeneration(ns, name) < gen || c.fleet.Behind(ns) > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s/%s generation %d not applied by every enforcer (%d behind): %w", ns, name, gen, c.fleet.Behind(ns), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func (c *cluster) expectInjected(ctx context.Context, want int) {
	missing, n, err := c.uninjected(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	if len(missing) > 0 {
		c.t.Fatalf("%d of %d pods have no enforcer, e.g. %s", len(missing), n, missing[0])
	}
	if n != want {
		c.t.Fatalf("%d pods, want %d", n, want)
	}
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:3], " ")
}

func envSizes(t *testing.T) []int {
	v := os.Getenv("SCALE_PODS")
	if v == "" {
		return []int{100, 1000, 10000}
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < namespaces || n%namespaces != 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			t.Fatalf("SCALE_PODS=%q: growing multiples of %d", v, namespaces)
		}
		out = append(out, n)
	}
	return out
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}
