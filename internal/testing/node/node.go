package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/internal/testing/stack"

	"github.com/sluice-dev/sluice/internal/testing/proc"
)

// Options configure a Cluster; the zero value is a working default.
type Options struct {
	// Root is the module's checkout; default: found from the working
	// directory.
	Root string
	// Assets holds etcd and kube-apiserver (make envtest); default
	// <Root>/bin/k8s.
	Assets string
	// NodeBin holds kubelet, kube-proxy, kube-controller-manager and
	// kube-scheduler (hack/envtest.sh node); default <Root>/bin/node.
	NodeBin string
	// Images are OCI or Docker archives imported into the node's runtime;
	// default: every <Root>/bin/images/*.tar (make node-images). The
	// harness adds HelloImage, and PauseImage unless one archive is
	// pause.tar or *-pause.tar, whose image is then the sandbox image.
	Images []string
	// CRDDirs are installed before Start returns.
	CRDDirs []string
	// WebhookDirs hold webhook configurations to register for a webhook
	// served on this machine (envtest's WebhookInstallOptions): the API
	// server calls https://127.0.0.1:<WebhookPort>.
	WebhookDirs []string
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
}

// Cluster is the running node and its control plane.
type Cluster struct {
	// Dir holds every configuration, state, socket and log of the run;
	// Close removes it.
	Dir string
	// Kubeconfig is a cluster-admin's, for kubectl and helm.
	Kubeconfig string
	Config     *rest.Config
	Client     client.Client
	// SandboxImage is the pause image the runtime makes sandboxes with.
	SandboxImage string
	// Images are the names of the images imported, by archive file name
	// ("sluice-enforcer.tar": "localhost/sluice-enforcer:v0.1.0").
	Images map[string]string
	// Timings are how long each step of Start took, in order.
	Timings []Timing
	// WebhookPort and WebhookCertDir are where a webhook registered from
	// Options.WebhookDirs must serve, and its certificate.
	WebhookPort    int
	WebhookCertDir string

	state    *runState
	lock     *hostLock
	cp       *controlPlane
	runtime  *containerd
	procs    []*process
	progress io.Writer
	closed   bool
}

// Timing is one step's duration.
type Timing struct {
	Step     string
	Duration time.Duration
}

// Start brings up the node. It needs root. A record of a previous run that
// did not end with Close is undone first; on error, whatever Start changed
// is undone.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a real node needs root: it runs containers, makes cgroups, a bridge and iptables rules")
	}
	if opts.Root == "" {
		if opts.Root, err = proc.Root(); err != nil {
			return nil, err
		}
	}
	if opts.Assets == "" {
		opts.Assets = filepath.Join(opts.Root, "bin", "k8s")
	}
	if opts.NodeBin == "" {
		opts.NodeBin = filepath.Join(opts.Root, "bin", "node")
	}
	if opts.Images == nil {
		opts.Images, _ = filepath.Glob(filepath.Join(opts.Root, "bin", "images", "*.tar"))
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	bins := map[string]string{}
	for _, name := range []string{"kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler"} {
		bins[name] = filepath.Join(opts.NodeBin, name)
		if _, err := os.Stat(bins[name]); err != nil {
			return nil, fmt.Errorf("%s is missing: hack/envtest.sh node builds it", bins[name])
		}
	}

	c := &Cluster{progress: opts.Progress}
	step := c.stepper()
	if c.lock, err = waitLock(ctx, lockPath, c.progress); err != nil {
		return nil, err
	}
	if stale, lerr := loadState(); lerr == nil {
		fmt.Fprintf(c.progress, "undoing a previous run that did not stop (%s)\n", stale.Dir)
		if err := stale.undo(); err != nil {
			_ = c.lock.release()
			return nil, fmt.Errorf("undo the previous run recorded in %s: %w", statePath(), err)
		}
		step("undo the previous run")
	}
	before, err := Snapshot()
	if err != nil {
		_ = c.lock.release()
		return nil, err
	}
	if len(before.Cgroups) > 0 {
		_ = c.lock.release()
		return nil, fmt.Errorf("%v exist: another kubelet runs on this host", before.Cgroups)
	}
	if c.Dir, err = os.MkdirTemp("", "sluice-node-"); err != nil {
		_ = c.lock.release()
		return nil, err
	}
	c.state = &runState{Dir: c.Dir, Bridge: BridgeName, Before: before}
	if err := c.state.save(); err != nil {
		_ = c.lock.release()
		return nil, err
	}
	defer func() {
		if err != nil {
			if cerr := c.Close(); cerr != nil {
				err = fmt.Errorf("%w (and undoing the start: %w)", err, cerr)
			}
		}
	}()

	c.say("making the pods' bridge %s (%s)", BridgeName, NodeIP+"/24")
	if err := makeBridge(); err != nil {
		return nil, err
	}
	c.say("starting etcd and kube-apiserver on %s", NodeIP)
	if c.cp, err = startControlPlane(c.Dir, opts.Assets, opts.CRDDirs, opts.WebhookDirs, c.state); err != nil {
		return nil, err
	}
	c.Config = c.cp.config
	c.WebhookPort = c.cp.env.WebhookInstallOptions.LocalServingPort
	c.WebhookCertDir = c.cp.env.WebhookInstallOptions.LocalServingCertDir
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := c.cp.kubeconfig(c.Kubeconfig, "sluice-admin", "system:masters"); err != nil {
		return nil, err
	}
	if c.Client, err = client.New(c.Config, client.Options{Scheme: stack.Scheme()}); err != nil {
		return nil, err
	}
	step("etcd and kube-apiserver")

	images, err := c.prepareImages(opts.Root, opts.Images)
	if err != nil {
		return nil, err
	}
	step("build the harness's images")

	c.say("starting containerd (sandbox image %s)", c.SandboxImage)
	if c.runtime, err = startContainerd(ctx, filepath.Join(c.Dir, "containerd"), c.SandboxImage, c.state); err != nil {
		return nil, err
	}
	c.procs = append(c.procs, c.runtime.proc)
	c.Images = map[string]string{}
	for _, archive := range images {
		if name, err := archiveImageName(archive); err == nil {
			c.Images[filepath.Base(archive)] = name
		}
		c.say("importing %s", archive)
		if err := c.runtime.importImage(ctx, archive); err != nil {
			return nil, err
		}
	}
	step("containerd and image import")

	c.say("starting kube-controller-manager and kube-scheduler")
	if err := c.startControllers(ctx, bins["kube-controller-manager"], bins["kube-scheduler"]); err != nil {
		return nil, err
	}
	step("kube-controller-manager and kube-scheduler")
	c.say("starting the kubelet")
	if err := c.startKubelet(ctx, bins["kubelet"]); err != nil {
		return nil, err
	}
	if err := c.waitNodeReady(ctx); err != nil {
		return nil, err
	}
	step("kubelet, node Ready")
	c.say("starting kube-proxy")
	if err := c.startKubeProxy(ctx, bins["kube-proxy"]); err != nil {
		return nil, err
	}
	step("kube-proxy")
	return c, nil
}

// stepper returns a function that records how long the step since the
// previous call took.
func (c *Cluster) stepper() func(string) {
	last := time.Now()
	return func(name string) {
		now := time.Now()
		c.Timings = append(c.Timings, Timing{Step: name, Duration: now.Sub(last)})
		fmt.Fprintf(c.progress, "%s: %s\n", name, now.Sub(last).Round(100*time.Millisecond))
		last = now
	}
}

func (c *Cluster) say(format string, args ...any) {
	fmt.Fprintf(c.progress, format+"\n", args...)
}

// prepareImages builds the harness's own images into the run's directory
// and returns every archive to import, naming the sandbox image.
func (c *Cluster) prepareImages(root string, archives []string) ([]string, error) {
	dir := filepath.Join(c.Dir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := append([]string(nil), archives...)
	hello := filepath.Join(dir, "hello.tar")
	if err := staticImage(root, "./internal/testing/node/images/hello", HelloImage, hello); err != nil {
		return nil, err
	}
	out = append(out, hello)
	for _, a := range archives {
		if base := filepath.Base(a); base == "pause.tar" || strings.HasSuffix(base, "-pause.tar") {
			name, err := archiveImageName(a)
			if err != nil {
				return nil, err
			}
			c.SandboxImage = name
			return out, nil
		}
	}
	pause := filepath.Join(dir, "pause.tar")
	if err := staticImage(root, "./build/pause", PauseImage, pause); err != nil {
		return nil, err
	}
	c.SandboxImage = PauseImage
	return append(out, pause), nil
}

func (c *Cluster) waitNodeReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var node corev1.Node
	for {
		if err := c.Client.Get(ctx, types.NamespacedName{Name: NodeName}, &node); err == nil {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s is not Ready: %w: %+v", NodeName, ctx.Err(), node.Status.Conditions)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Run starts a program of the test's on this machine (a manager run
// outside the cluster, say), logging to LogPath(name); Close stops it, and
// a later Start does if this process dies first.
func (c *Cluster) Run(name string, cmd *exec.Cmd) error {
	p, err := startProcess(name, c.LogPath(name), cmd)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return c.state.track(name, p.pid())
}

// RuntimeSocket is containerd's socket, for ctr --address (namespace
// k8s.io holds the kubelet's images and containers).
func (c *Cluster) RuntimeSocket() string { return c.runtime.socket }

// ImportImage loads an OCI or Docker archive into the node's runtime.
func (c *Cluster) ImportImage(ctx context.Context, archive string) error {
	return c.runtime.importImage(ctx, archive)
}

// Pids are the processes the harness started (etcd, kube-apiserver,
// containerd and the Kubernetes daemons), in start order.
func (c *Cluster) Pids() []int {
	var out []int
	for _, p := range c.state.Procs {
		out = append(out, p.Pid)
	}
	return out
}

// LogPath is the log of the named daemon (containerd, kubelet,
// kube-proxy, kube-controller-manager, kube-scheduler).
func (c *Cluster) LogPath(name string) string {
	if name == "containerd" {
		return filepath.Join(c.Dir, "containerd", "containerd.log")
	}
	return filepath.Join(c.Dir, name+".log")
}

// Close stops everything the harness started, newest first, and returns
// the host to the state Start found. It can be called more than once.
func (c *Cluster) Close() error {
	if c.closed || c.state == nil {
		return nil
	}
	c.closed = true
	defer func() { _ = c.lock.release() }()
	start := time.Now()
	step := c.stepper()
	// The daemons that would start new containers or programs go first,
	// then the containers, then the runtime; kube-proxy's rules go with
	// the undo below.
	for i := len(c.procs) - 1; i >= 0; i-- {
		if c.procs[i] == c.runtime.procOrNil() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			c.runtime.stopTasks(ctx)
			cancel()
			step("close: kill the containers")
		}
		c.procs[i].stop(10 * time.Second)
		step("close: stop " + c.procs[i].name)
	}
	c.cp.stop()
	step("close: stop kube-apiserver and etcd")
	err := c.state.undo()
	step("close: undo the host changes")
	c.Timings = append(c.Timings, Timing{Step: "close", Duration: time.Since(start)})
	fmt.Fprintf(c.progress, "stopped and restored the host in %s\n", time.Since(start).Round(100*time.Millisecond))
	return err
}

func (c *containerd) procOrNil() *process {
	if c == nil {
		return nil
	}
	return c.proc
}

// UndoStale undoes a run that ended without Close (its process killed),
// as the next Start would, and reports whether there was one. It refuses
// while a run is in progress, with a *HeldError naming it: that run
// restores the host itself when it ends.
func UndoStale() (bool, error) {
	lock, err := tryLock(lockPath)
	if err != nil {
		return false, err
	}
	defer func() { _ = lock.release() }()
	stale, err := loadState()
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, stale.undo()
}
