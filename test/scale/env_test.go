//go:build scale

package scale

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/testing/envtestutil"
	"github.com/sluice-dev/sluice/internal/testing/fleet"
	"github.com/sluice-dev/sluice/internal/testing/proc"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
	"github.com/sluice-dev/sluice/internal/testing/stack"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

const (
	// nodeName is the kwok node every pod is bound to (there is no scheduler).
	nodeName = "kwok-node-0"
	// podCIDR is where kwok gives pods their IPs: inside 127.0.0.0/8, so
	// that the manager reaches the simulated enforcers over loopback, and
	// outside the /24s the e2e stack picks (127.10-249.x.0).
	podCIDR = "127.252.0.0/16"
	// namespaces × policiesPerNamespace is the 1,000 policies.
	namespaces           = 100
	policiesPerNamespace = 10
	createWorkers        = 32
)

// cluster is everything the suite runs.
type cluster struct {
	t        *testing.T
	dir      string
	cp       *stack.ControlPlane
	client   client.Client
	redis    *redistest.Server
	kwok     *stack.Process
	fleet    *fleet.Fleet
	replicas []*replica
	front    *webhookFront
	// policyWrites counts the writes of RateLimitPolicies the suite sees
	// (status patches among them).
	policyWrites atomic.Int64
	// restarts counts the replicas that exited and were started again.
	restarts atomic.Int64
	cancel   context.CancelFunc
}

func namespaceName(i int) string { return fmt.Sprintf("scale-%03d", i) }
func policyName(j int) string    { return fmt.Sprintf("p%d", j) }

// startCluster starts the control plane, Redis, kwok and its node, the
// fleet and three managers with leader election and the webhook behind
// one address, and creates the namespaces and the 1,000 policies.
func startCluster(ctx context.Context, t *testing.T, maxPods int) *cluster {
	t.Helper()
	if err := raiseFileLimit(uint64(maxPods) + 4096); err != nil {
		t.Fatal(err)
	}
	root, err := proc.Root()
	if err != nil {
		t.Fatal(err)
	}
	assets, err := envtestutil.Assets(root)
	if err != nil {
		t.Fatal(err)
	}
	kwokBin := os.Getenv("KWOK")
	if kwokBin == "" {
		kwokBin = filepath.Join(root, "bin", "kwok")
	}
	if _, err := os.Stat(kwokBin); err != nil {
		t.Fatalf("kwok (make test-scale builds it into bin/, or set KWOK): %v", err)
	}
	dir := t.TempDir()
	c := &cluster{t: t, dir: dir}
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	t.Cleanup(c.stop)

	t.Log("building sluice-manager")
	managerBin := filepath.Join(dir, "sluice-manager")
	if out, err := buildCmd(ctx, root, managerBin).CombinedOutput(); err != nil {
		t.Fatalf("build the manager: %v\n%s", err, out)
	}
	t.Log("starting etcd and kube-apiserver")
	if c.cp, err = stack.StartControlPlane(root, assets, dir); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(c.cp.Config())
	cfg.QPS, cfg.Burst = 2000, 4000
	if c.client, err = client.New(cfg, client.Options{Scheme: stack.Scheme()}); err != nil {
		t.Fatal(err)
	}
	if c.redis, err = redistest.New(); err != nil {
		t.Fatal(err)
	}

	t.Log("starting kwok")
	if err := c.client.Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec:       corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("20000")},
			Capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("20000")}},
	}); err != nil {
		t.Fatal(err)
	}
	stages, err := filepath.Abs(filepath.Join("testdata", "kwok-stages.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.kwok, err = stack.StartProcess("kwok", filepath.Join(dir, "kwok.log"), exec.Command(kwokBin,
		"--config="+stages, "--kubeconfig="+c.cp.Kubeconfig(),
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr="+podCIDR, "--node-ip=127.0.0.1", "--node-lease-duration-seconds=40")); err != nil {
		t.Fatal(err)
	}

	t.Log("starting the fleet of enforcers")
	fleetLog, err := os.Create(filepath.Join(dir, "fleet.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleetLog.Close() })
	labels := filepath.Join(dir, "labels")
	if err := os.Mkdir(labels, 0o700); err != nil {
		t.Fatal(err)
	}
	c.fleet = fleet.New(runCtx, labels, c.redis.URL())
	// The manager pushes edits to the enforcers' admin port: the kubelet's
	// refresh of the ConfigMap volume (a minute or more) is left out, so
	// that what is measured is the push.
	c.fleet.Refresh = os.Getenv("SCALE_KUBELET_REFRESH") == "instant"

	if err := c.fleet.Watch(runCtx, cfg, nodeName, fleetLog); err != nil {
		t.Fatal(err)
	}
	c.watchPolicyWrites(runCtx, cfg)

	t.Log("starting three managers")
	port, certDir := c.cp.Webhook()
	c.replicas, err = newReplicas(managerBin, dir, 3, []string{
		"--kubeconfig=" + c.cp.Kubeconfig(), "--leader-elect", "--leader-election-namespace=default",
		"--default-redis-url=" + c.redis.URL(), "--enforcer-image=sluice-enforcer:dev",
		"--webhook-cert-self-managed=false", "--webhook-cert-dir=" + certDir, "--webhook-failure-policy=Fail",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.front, err = startWebhookFront(port, c.webhookBackends); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.replicas {
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range c.replicas {
		if err := r.waitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.leader(ctx); err != nil {
		t.Fatal(err)
	}
	go c.supervise(runCtx)

	t.Log("creating 100 namespaces and 1,000 policies")
	for i := range namespaces {
		if err := c.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceName(i),
			Labels: map[string]string{wellknown.InjectionNamespaceLabel: wellknown.InjectionEnabled}}}); err != nil {
			t.Fatal(err)
		}
	}
	var policies []client.Object
	for i := range namespaces {
		for j := range policiesPerNamespace {
			policies = append(policies, newPolicy(namespaceName(i), policyName(j)))
		}
	}
	if err := parallel(ctx, policies, func(ctx context.Context, p client.Object) error { return c.client.Create(ctx, p) }); err != nil {
		t.Fatal(err)
	}
	return c
}

// newPolicy is a policy selecting the pods labelled app=<name>.
func newPolicy(namespace, name string) *v1alpha1.RateLimitPolicy {
	return &v1alpha1.RateLimitPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.RateLimitPolicySpec{
			Selector:     metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			UpstreamPort: 8080,
			Rules: []v1alpha1.Rule{{Name: "api", Algorithm: v1alpha1.AlgorithmTokenBucket,
				Limits: []v1alpha1.Limit{{Requests: 100, Period: metav1.Duration{Duration: time.Minute}}}}},
		},
	}
}

// appPod is the i-th pod of the cluster, bound to the kwok node: pod i is
// in namespace i%100 and selected by policy (i/100)%10 of it, so each
// scale step spreads over every namespace and, from 1,000 pods, every
// policy.
func appPod(i int, suffix string) *corev1.Pod {
	pod := stack.AppPod(namespaceName(i%namespaces), fmt.Sprintf("pod-%05d%s", i, suffix),
		map[string]string{"app": policyName((i / namespaces) % policiesPerNamespace)}, 8080)
	pod.Spec.NodeName = nodeName
	return pod
}

func (c *cluster) webhookBackends() []string {
	var out []string
	for _, r := range c.replicas {
		if r.running() {
			out = append(out, fmt.Sprintf("127.0.0.1:%d", r.webhook))
		}
	}
	return out
}

// leader waits until one replica leads and returns it.
func (c *cluster) leader(ctx context.Context) (*replica, error) {
	for {
		for _, r := range c.replicas {
			if r.leading() {
				return r, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no manager leads: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// supervise starts again, as a Deployment's kubelet would, a replica that
// exited: killed by the suite, or stopped when it lost its lease (a leader
// that cannot renew it in time steps down by exiting).
func (c *cluster) supervise(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		for _, r := range c.replicas {
			if ctx.Err() == nil && !r.running() {
				if err := r.start(); err == nil {
					c.restarts.Add(1)
				}
			}
		}
	}
}

// watchPolicyWrites counts every change of a RateLimitPolicy the API
// server sends: each is a write (spec or status).
func (c *cluster) watchPolicyWrites(ctx context.Context, cfg *rest.Config) {
	informers, err := ctrlcache.New(cfg, ctrlcache.Options{Scheme: stack.Scheme()})
	if err != nil {
		c.t.Fatal(err)
	}
	inf, err := informers.GetInformer(ctx, &v1alpha1.RateLimitPolicy{})
	if err != nil {
		c.t.Fatal(err)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) { c.policyWrites.Add(1) }})
	go func() { _ = informers.Start(ctx) }()
	informers.WaitForCacheSync(ctx)
}

// createPods creates pods, retrying each as a ReplicaSet controller would
// while the webhook refuses (failurePolicy Fail), and returns each
// create call's duration and the number of refused calls.
func (c *cluster) createPods(ctx context.Context, pods []*corev1.Pod) (durations []time.Duration, refused int, err error) {
	var mu sync.Mutex
	err = parallel(ctx, pods, func(ctx context.Context, pod *corev1.Pod) error {
		for {
			p := pod.DeepCopy()
			start := time.Now()
			err := c.client.Create(ctx, p)
			d := time.Since(start)
			mu.Lock()
			if err == nil {
				durations = append(durations, d)
			} else {
				refused++
			}
			mu.Unlock()
			if err == nil {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("create %s/%s: %w (last: %w)", pod.Namespace, pod.Name, ctx.Err(), err)
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
	slices.Sort(durations)
	return durations, refused, err
}

func (c *cluster) deletePods(ctx context.Context, pods []*corev1.Pod) error {
	return parallel(ctx, pods, func(ctx context.Context, pod *corev1.Pod) error {
		return client.IgnoreNotFound(c.client.Delete(ctx, pod, client.GracePeriodSeconds(0)))
	})
}

// uninjected lists the pods of the scale namespaces without the enforcer.
func (c *cluster) uninjected(ctx context.Context) ([]string, int, error) {
	var pods corev1.PodList
	if err := c.client.List(ctx, &pods); err != nil {
		return nil, 0, err
	}
	var out []string
	n := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Spec.NodeName != nodeName || pod.DeletionTimestamp != nil {
			continue
		}
		if _, ok := pod.Labels["app"]; !ok {
			continue
		}
		n++
		if !inject.HasEnforcer(pod) && pod.Namespace != plainNamespace {
			out = append(out, pod.Namespace+"/"+pod.Name)
		}
	}
	return out, n, nil
}

// converged tells whether every policy reports Ready at its generation,
// with as many enforcers up to date as pods it selects (want, by policy
// name, the same in every namespace).
func (c *cluster) converged(ctx context.Context, want map[string]int32) (bool, string, error) {
	var list v1alpha1.RateLimitPolicyList
	if err := c.client.List(ctx, &list); err != nil {
		return false, "", err
	}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Namespace == plainNamespace {
			continue
		}
		ready := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		e := p.Status.Enforcers
		switch {
		case e.Selected != want[p.Name] || e.UpToDate != want[p.Name]:
			return false, fmt.Sprintf("%s/%s: %d selected, %d up to date, want %d", p.Namespace, p.Name, e.Selected, e.UpToDate, want[p.Name]), nil
		case ready == nil || ready.ObservedGeneration != p.Generation:
			return false, fmt.Sprintf("%s/%s: Ready not at generation %d", p.Namespace, p.Name, p.Generation), nil
		case want[p.Name] > 0 && ready.Status != metav1.ConditionTrue:
			return false, fmt.Sprintf("%s/%s: Ready %s: %s", p.Namespace, p.Name, ready.Status, ready.Message), nil
		}
	}
	return true, "", nil
}

// waitConverged waits until converged and returns how long it took.
func (c *cluster) waitConverged(ctx context.Context, pods int) (time.Duration, error) {
	want := map[string]int32{}
	for i := range pods {
		want[policyName((i/namespaces)%policiesPerNamespace)]++
	}
	for name := range want {
		want[name] /= namespaces
	}
	start := time.Now()
	last := ""
	for {
		ok, why, err := c.converged(ctx, want)
		if err == nil && ok && c.fleet.Count() >= pods {
			return time.Since(start), nil
		}
		if why != "" {
			last = why
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("not converged at %d pods (%d enforcers running): %s: %w", pods, c.fleet.Count(), last, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// plainNamespace has no injection: the baseline of pod creation.
const plainNamespace = "scale-plain"

func (c *cluster) stop() {
	if c.cancel != nil {
		c.cancel() // no more restarts
	}
	if c.front != nil {
		c.front.close()
	}
	for _, r := range c.replicas {
		if r.running() {
			r.proc.Stop(10 * time.Second)
		}
	}
	if c.cancel != nil {
		c.cancel()
	}
	if c.fleet != nil {
		c.fleet.Close()
	}
	if c.kwok != nil {
		c.kwok.Stop(5 * time.Second)
	}
	if c.redis != nil {
		c.redis.Close()
	}
	if c.cp != nil {
		c.cp.Stop()
	}
}

// parallel runs do on every item, createWorkers at a time, and returns the
// first error.
func parallel[T any](ctx context.Context, items []T, do func(context.Context, T) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan T)
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range createWorkers {
		wg.Go(func() {
			for item := range work {
				if err := do(ctx, item); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
	for _, item := range items {
		select {
		case work <- item:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return first
}

func buildCmd(ctx context.Context, root, out string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/manager")
	cmd.Dir = root
	return cmd
}
