// Command demo-node is `make demo-node`: Sluice on a real single-node
// Kubernetes on this machine (internal/testing/node: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kube-proxy, a kubelet with
// containerd and runc), installed with helm from the images of make
// node-images. It runs Redis and a sample application of two replicas as
// Deployments, applies the public-api sample policy, drives traffic through
// the application's Service, rolls the application out again under
// traffic, and stops. It needs root: it changes iptables, cgroups, mounts
// and sysctls while it runs, and puts every one of them back when it ends,
// however it ends (make node-undo cleans up after a run that was killed).
//
//	go run ./hack/demo-node [--keep]
//
// With --keep (make demo-node KEEP=1) the node stays up after the demo, for
// kubectl, helm and curl (docs/first-policy.md can be followed on it), until
// Ctrl-C or SIGTERM; after a failed step too, to look at what failed. One
// real-node run at a time per host: a second one waits for the first.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluice-dev/sluice/internal/testing/node"
	"github.com/sluice-dev/sluice/internal/testing/proc"
)

func main() {
	// A flag set of its own: controller-runtime registers --kubeconfig on
	// the default one, which means nothing here.
	fs := flag.NewFlagSet("sluice-demo-node", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sluice-demo-node [--keep]

Sluice on a real single-node Kubernetes on this machine (make demo-node): a
kubelet with containerd and runc, kube-proxy, the chart installed with helm,
traffic limited through a Service. It needs root and changes iptables,
cgroups, mounts and sysctls while it runs; it restores them when it ends.

Flags:
`)
		fs.PrintDefaults()
	}
	keep := fs.Bool("keep", false, "leave the node running after the demo, until Ctrl-C or SIGTERM (make demo-node KEEP=1)")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "sluice-demo-node takes no arguments, not %q\n", fs.Args())
		fs.Usage()
		os.Exit(2)
	}
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "make demo-node runs a kubelet and needs root (sudo make demo-node); make demo needs none")
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{keep: *keep}
	if err := d.run(ctx); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) && !d.failedKept {
			if d.cluster == nil {
				fmt.Println("\ninterrupted before the node started: nothing on the host was changed")
			} else {
				fmt.Println("\ninterrupted: everything is stopped and the host restored")
			}
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "\ndemo-node failed:", err)
		os.Exit(1)
	}
}

type demo struct {
	keep    bool
	root    string
	cluster *node.Cluster
	// serviceURL is the application's Service, once it has one.
	serviceURL string
	// failedKept is set when a step failed and the node was kept for a look.
	failedKept bool
}

func (d *demo) run(ctx context.Context) (err error) {
	start := time.Now()
	if d.root, err = proc.Root(); err != nil {
		return fmt.Errorf("%w: run it from the checkout (make demo-node)", err)
	}
	fmt.Println("Sluice on a real node: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,")
	fmt.Println("kube-proxy and a kubelet with containerd and runc on this machine, pods on bridge")
	fmt.Printf("%s (%s). The chart is installed with helm from the images of make node-images.\n\n", node.BridgeName, node.PodCIDR)
	c, err := node.Start(ctx, node.Options{Root: d.root, Progress: progress{}})
	if err != nil {
		return err
	}
	d.cluster = c
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
	for _, step := range []func(context.Context) error{d.install, d.deploy, d.traffic, d.rollout} {
		if err = step(ctx); err != nil {
			break
		}
	}
	if err == nil {
		fmt.Printf("\nThe demo took %s.\n", time.Since(start).Round(time.Second))
	}
	if d.keep && ctx.Err() == nil {
		if err != nil {
			fmt.Fprintln(os.Stderr, "\ndemo-node failed:", err)
			d.failedKept = true
		}
		d.keepRunning(ctx, err != nil)
	}
	return err
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
	return d.shShowing(ctx, line, 0)
}

// shShowing is sh printing only the first show lines of the output (all of
// them when show is 0, or when the command fails). The output is cut here
// rather than with "| head": under pipefail, head exiting first would fail
// a command that succeeded.
func (d *demo) shShowing(ctx context.Context, line string, show int) (string, error) {
	fmt.Printf("\n   $ %s\n", line)
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", line)
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.cluster.Kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(d.cluster.Dir, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(d.cluster.Dir, "helm", "config"),
		"HELM_DATA_HOME="+filepath.Join(d.cluster.Dir, "helm", "data"),
		"PATH="+d.toolPath()+":"+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if show > 0 && err == nil && len(lines) > show {
		lines = append(lines[:show], fmt.Sprintf("(%d more lines)", len(lines)-show))
	}
	for _, l := range lines {
		if l != "" {
			fmt.Printf("   %s\n", l)
		}
	}
	if err != nil {
		return out.String(), fmt.Errorf("%s\n  failed (%w); what it printed is above", line, err)
	}
	return strings.TrimSpace(out.String()), nil
}

// toolPath is where kubectl (make envtest) and helm (the pinned tools) are.
func (d *demo) toolPath() string {
	return filepath.Join(d.root, "bin", "k8s") + ":" + filepath.Join(d.root, "bin")
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
	if _, err := d.shShowing(ctx, "helm install sluice charts/sluice -n sluice-system --create-namespace \\\n"+
		"       --set images.registry=localhost --set images.pullPolicy=Never \\\n"+
		"       --set manager.replicas=1 --set enforcer.statusPolling.interval=2s \\\n"+
		"       --set defaultRedis.url=redis://"+ip+":6379", 5); err != nil {
		return err
	}
	fmt.Println("   (the manager turns ready once the kubelet mounts the certificate it issued for its webhook)")
	fmt.Println("   (the manager pushes each policy edit to the enforcers, so it shows within a second or two,")
	fmt.Println("   here as on a default cluster; the chart polls the enforcers every 2s here, 10s by default)")
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
	// With webhook.failurePolicy Ignore, a pod created before the API
	// server reaches the webhook (its Service's endpoints follow the
	// manager's readiness by a moment) starts without the enforcer; a
	// server-side dry run of a selected pod says when it no longer would.
	fmt.Println("\n   (until the API server reaches the webhook, new pods would start without the enforcer: a server-side dry run says when it does)")
	if _, err := d.sh(ctx, fmt.Sprintf("for i in $(seq 60); do kubectl -n demo run injection-check --image=%s --labels=app.kubernetes.io/name=public-api "+
		"--restart=Never --dry-run=server -o jsonpath='{.spec.initContainers[*].name}' 2>/dev/null | grep -q sluice-enforcer && "+
		"echo 'a pod created now gets the enforcer' && exit 0; sleep 2; done; echo 'the webhook did not inject within 2 minutes'; exit 1",
		d.cluster.Images["sluice-echo.tar"])); err != nil {
		return err
	}
	if err := d.apply(ctx, "public-api.yaml", fmt.Sprintf(appManifest, d.cluster.Images["sluice-echo.tar"])); err != nil {
		return err
	}
	for _, line := range []string{
		"kubectl -n demo rollout status deployment/public-api --timeout=2m",
	} {
		if _, err := d.sh(ctx, line); err != nil {
			return err
		}
	}
	if _, err := d.sh(ctx, "kubectl wait rlp/public-api -n demo --for=condition=Ready --timeout=3m"); err != nil {
		// What keeps it from Ready is in the condition's message and the
		// policy's Events.
		conds, _ := d.sh(ctx, `kubectl get rlp/public-api -n demo -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}'`)
		_, _ = d.sh(ctx, "kubectl events -n demo --for rlp/public-api")
		_, _ = d.sh(ctx, "kubectl get pods -n demo -o wide")
		return fmt.Errorf("%w\n  the policy's conditions:\n%s", err, conds)
	}
	for _, line := range []string{
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
