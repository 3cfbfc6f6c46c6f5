// Command demo-node is `make demo-node`: Sluice on a real single-node
// Kubernetes on this machine (internal/node: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kube-proxy, a kubelet with
// containerd and runc), installed with helm from the images of make
// node-images. It runs Redis and a sample application of two replicas as
// Deployments, applies the public-api sample policy, drives traffic through
// the application's Service, rolls the application out again under
// traffic, and stops. It needs root: it changes iptables, cgroups, mounts
// and sysctls while it runs, and puts every one of them back when it ends,
// however it ends (make node-undo cleans up after a run that was killed).
//
//	go run ./hack/demo-node
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluice-dev/sluice/internal/node"
	"github.com/sluice-dev/sluice/internal/proc"
)

func main() {
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "make demo-node runs a kubelet and needs root (sudo make demo-node); make demo needs none")
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			fmt.Println("\ninterrupted: everything is stopped and the host restored")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "\ndemo-node failed:", err)
		os.Exit(1)
	}
}

type demo struct {
	root    string
	cluster *node.Cluster
}

func run(ctx context.Context) (err error) {
	start := time.Now()
	root, err := proc.Root()
	if err != nil {
		return err
	}
	fmt.Println("Sluice on a real node: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,")
	fmt.Println("kube-proxy and a kubelet with containerd and runc on this machine, pods on bridge")
	fmt.Printf("%s (%s). The chart is installed with helm from the images of make node-images.\n\n", node.BridgeName, node.PodCIDR)
	c, err := node.Start(ctx, node.Options{Root: root, Progress: progress{}})
	if err != nil {
		return err
	}
	defer func() {
		cerr := c.Close()
		if cerr == nil {
			fmt.Println("everything is stopped and the host restored (iptables, cgroups, mounts, sysctls, bridge)")
		}
		err = errors.Join(err, cerr)
	}()
	fmt.Printf("  · the node is Ready after %s; kubeconfig and logs in %s\n", time.Since(start).Round(100*time.Millisecond), c.Dir)
	for _, archive := range []string{"sluice-manager.tar", "sluice-enforcer.tar", "sluice-echo.tar", "sluice-redis.tar"} {
		if c.Images[archive] == "" {
			return fmt.Errorf("bin/images/%s is missing: make node-images", archive)
		}
	}
	d := &demo{root: root, cluster: c}
	for _, step := range []func(context.Context) error{d.install, d.deploy, d.traffic, d.rollout} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	fmt.Printf("\nThe demo took %s.\n", time.Since(start).Round(time.Second))
	return nil
}

// progress prints the harness's steps.
type progress struct{}

func (progress) Write(p []byte) (int, error) {
	fmt.Printf("  · %s", p)
	return len(p), nil
}

func section(title string) { fmt.Printf("\n%s\n", title) }

// sh runs a command line as a user would, in the checkout, printing it and
// what it printed.
func (d *demo) sh(ctx context.Context, line string) (string, error) {
	fmt.Printf("\n   $ %s\n", line)
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", line)
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.cluster.Kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(d.cluster.Dir, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(d.cluster.Dir, "helm", "config"),
		"HELM_DATA_HOME="+filepath.Join(d.cluster.Dir, "helm", "data"),
		"PATH="+filepath.Join(d.root, "bin", "k8s")+":"+filepath.Join(d.root, "bin")+":"+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		if l != "" {
			fmt.Printf("   %s\n", l)
		}
	}
	if err != nil {
		return out.String(), fmt.Errorf("%s: %w", line, err)
	}
	return strings.TrimSpace(out.String()), nil
}

// apply writes a manifest into the run's directory and applies it.
func (d *demo) apply(ctx context.Context, name, manifest string) error {
	path := filepath.Join(d.cluster.Dir, name)
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		return err
	}
	_, err := d.sh(ctx, "kubectl apply -f "+path)
	return err
}

const redisManifest = `apiVersion: v1
kind: Namespace
metadata: {name: redis}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: redis, namespace: redis}
spec:
  selector: {matchLabels: {app: redis}}
  template:
    metadata: {labels: {app: redis}}
    spec:
      containers:
        - name: redis
          image: %s
          imagePullPolicy: Never
          ports: [{name: redis, containerPort: 6379}]
---
apiVersion: v1
kind: Service
metadata: {name: redis, namespace: redis}
spec:
  selector: {app: redis}
  ports: [{port: 6379, targetPort: redis}]
`

func (d *demo) install(ctx context.Context) error {
	section("1. Redis, and Sluice installed with helm")
	if err := d.apply(ctx, "redis.yaml", fmt.Sprintf(redisManifest, d.cluster.Images["sluice-redis.tar"])); err != nil {
		return err
	}
	// The node runs no cluster DNS: the enforcers reach Redis by its
	// ClusterIP rather than redis.redis.svc.
	ip, err := d.sh(ctx, "kubectl -n redis get svc redis -o jsonpath='{.spec.clusterIP}'")
	if err != nil {
		return err
	}
	fmt.Println("   (this node has no cluster DNS: the default Redis is given by its ClusterIP)")
	if _, err := d.sh(ctx, "helm install sluice charts/sluice -n sluice-system --create-namespace \\\n"+
		"       --set images.registry=localhost --set images.pullPolicy=Never \\\n"+
		"       --set manager.replicas=1 --set enforcer.statusPolling.interval=2s \\\n"+
		"       --set defaultRedis.url=redis://"+ip+":6379 | head -5"); err != nil {
		return err
	}
	fmt.Println("   (the manager turns ready once the kubelet mounts the certificate it issued for its webhook)")
	_, err = d.sh(ctx, "kubectl -n sluice-system rollout status deployment/sluice-manager --timeout=3m && kubectl -n redis rollout status deployment/redis")
	return err
}

const appManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: public-api, namespace: demo}
spec:
  replicas: 2
  selector: {matchLabels: {app.kubernetes.io/name: public-api}}
  template:
    metadata: {labels: {app.kubernetes.io/name: public-api}}
    spec:
      containers:
        - name: api
          image: %s
          imagePullPolicy: Never
          ports: [{name: http, containerPort: 8080}]
          readinessProbe: {httpGet: {path: /, port: http}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: public-api, namespace: demo}
spec:
  selector: {app.kubernetes.io/name: public-api}
  ports: [{port: 80, targetPort: sluice-http}]
`

func (d *demo) deploy(ctx context.Context) error {
	section("2. A policy, then an application of two replicas behind a Service (targetPort: sluice-http)")
	for _, line := range []string{
		"kubectl create namespace demo && kubectl label namespace demo sluice.dev/injection=enabled",
		"kubectl apply -n demo -f config/samples/ratelimitpolicy_public_api.yaml",
	} {
		if _, err := d.sh(ctx, line); err != nil {
			return err
		}
	}
	if err := d.apply(ctx, "public-api.yaml", fmt.Sprintf(appManifest, d.cluster.Images["sluice-echo.tar"])); err != nil {
		return err
	}
	for _, line := range []string{
		"kubectl -n demo rollout status deployment/public-api --timeout=2m",
		"kubectl wait rlp/public-api -n demo --for=condition=Ready --timeout=2m",
		"kubectl get pods -n demo -o wide | cut -c1-100",
		"kubectl get pod -n demo -l app.kubernetes.io/name=public-api -o jsonpath='{.items[0].spec.initContainers[0].name} restartPolicy={.items[0].spec.initContainers[0].restartPolicy}'",
		"kubectl get rlp -n demo -o wide",
	} {
		if _, err := d.sh(ctx, line); err != nil {
			return err
		}
	}
	return nil
}

// answer is what a request got.
type answer struct {
	code         int
	proto, state string
	header       http.Header
	body         []byte
}

// get sends one request to the Service as an API key's holder, on a
// connection of its own (kube-proxy picks a pod per connection).
func get(ctx context.Context, url, apiKey string) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", apiKey)
	resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return &answer{code: resp.StatusCode, proto: resp.Proto, state: resp.Status, header: resp.Header, body: body}, err
}

func (d *demo) serviceURL(ctx context.Context) (string, error) {
	ip, err := d.sh(ctx, "kubectl -n demo get svc public-api -o jsonpath='{.spec.clusterIP}'")
	return "http://" + ip + "/", err
}

func (d *demo) traffic(ctx context.Context) error {
	section("3. Traffic through the Service's ClusterIP, spread by kube-proxy over both pods")
	url, err := d.serviceURL(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "\n   API KEY\tLIMIT\tREQUESTS\tALLOWED\tDENIED\tPODS THAT ANSWERED 200")
	var refused *answer
	for _, key := range []string{"abusive-client", "polite-client"} {
		n := 100
		if key == "polite-client" {
			n = 20
		}
		allowed, denied, pods := 0, 0, map[string]bool{}
		for range n {
			a, err := get(ctx, url, key)
			if err != nil {
				return err
			}
			switch a.code {
			case http.StatusOK:
				allowed++
				if i := bytes.Index(a.body, []byte(`"pod":"`)); i >= 0 {
					pods[string(bytes.SplitN(a.body[i+7:], []byte(`"`), 2)[0])] = true
				}
			case http.StatusTooManyRequests:
				denied++
				refused = a
			default:
				return fmt.Errorf("GET %s: %s", url, a.state)
			}
		}
		fmt.Fprintf(w, "   %s\t60/min\t%d\t%d\t%d\t%d\n", key, n, allowed, denied, len(pods))
	}
	_ = w.Flush()
	if refused != nil {
		fmt.Println("\n   A refused answer:")
		fmt.Printf("     %s %s\n", refused.proto, refused.state)
		for _, h := range []string{"Content-Type", "Ratelimit", "Ratelimit-Policy", "Retry-After", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"} {
			if v := refused.header.Get(h); v != "" {
				fmt.Printf("     %s: %s\n", h, v)
			}
		}
		fmt.Printf("     %s\n", bytes.TrimSpace(refused.body))
	}
	fmt.Println("\n   One limit for both replicas: the counters are in Redis.")
	return nil
}

func (d *demo) rollout(ctx context.Context) error {
	section("4. kubectl rollout restart under steady traffic")
	url, err := d.serviceURL(ctx)
	if err != nil {
		return err
	}
	var stopped atomic.Bool
	var sent, failed atomic.Int64
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			for n := 0; !stopped.Load(); n++ {
				sent.Add(1)
				a, err := get(ctx, url, fmt.Sprintf("steady-%d-%d", i, n))
				if err != nil || a.code != http.StatusOK {
					failed.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	start := time.Now()
	_, err = d.sh(ctx, "kubectl -n demo rollout restart deployment/public-api && kubectl -n demo rollout status deployment/public-api --timeout=2m")
	if err == nil {
		// Traffic goes on until the old pods are gone: each drains 5 s first.
		err = d.waitPods(ctx, "demo", 2)
	}
	stopped.Store(true)
	wg.Wait()
	if err != nil {
		return err
	}
	fmt.Printf("\n   %d requests during the rollout (%s), %d failed.\n", sent.Load(), time.Since(start).Round(100*time.Millisecond), failed.Load())
	fmt.Println("   The kubelet stops a native sidecar after the application; the preStop hook the webhook gave the")
	fmt.Println("   application makes each old pod's enforcer drain first, while the pod leaves the Service.")
	_, err = d.sh(ctx, "kubectl get pods -n demo")
	return err
}

// waitPods waits until namespace ns has n pods, none of them terminating.
func (d *demo) waitPods(ctx context.Context, ns string, n int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var list corev1.PodList
		if err := d.cluster.Client.List(ctx, &list, client.InNamespace(ns)); err == nil && len(list.Items) == n {
			terminating := false
			for _, p := range list.Items {
				terminating = terminating || p.DeletionTimestamp != nil
			}
			if !terminating {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the old pods of namespace %s are still there: %w", ns, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
