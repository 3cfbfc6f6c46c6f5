// Package stack runs the whole of Sluice on one machine, as real
// processes: etcd and kube-apiserver (controller-runtime envtest) with the
// CRDs and the injection webhook registered, a redis-server, sluice-manager
// built from ./cmd/manager, and a Kubelet that runs the pods the webhook
// injected: each on a loopback IP of its own, the enforcer sidecar as the
// process its container spec describes, the application as a small upstream
// that echoes requests (or, for OrdersPod, the gRPC sample application run
// as its container describes).
//
// `make demo` (hack/demo) and the end-to-end suite (test/e2e) share it:
//
//	s, err := stack.Start(ctx, stack.Options{})
//	if err != nil { ... }
//	defer s.Close()
//
// Close stops every process the stack started and removes its directory.
// Processes the stack starts die with it however it ends (Pdeathsig, and a
// reaper for the control plane), so none outlives a crashed test.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/envtestutil"
	"github.com/sluice-dev/sluice/internal/testing/proc"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// Options configure a Stack; the zero value is a working default.
type Options struct {
	// Root is the module's checkout; default: found from the working directory.
	Root string
	// Assets holds etcd, kube-apiserver and kubectl; default:
	// $KUBEBUILDER_ASSETS, else <Root>/bin/k8s (make envtest).
	Assets string
	// Progress receives a line per slow step; nil discards them.
	Progress io.Writer
	// PodNetwork is the /24 of 127.0.0.0/8 that pods get addresses in
	// (from .2); default: a random one, so that stacks do not collide.
	PodNetwork [3]byte
	// EnforcerImage is the image the webhook injects; the Kubelet runs the
	// sluice-enforcer built from ./cmd/enforcer for it.
	EnforcerImage string
	// StatusInterval is how often the manager polls the enforcers
	// (default 1s).
	StatusInterval time.Duration
	// ManagerArgs are added to the manager's command line.
	ManagerArgs []string
}

// Stack is the running system.
type Stack struct {
	// Dir holds the kubeconfig, the binaries, every log and the pods'
	// volumes; Close removes it.
	Dir        string
	Kubeconfig string
	Config     *rest.Config
	Client     client.Client
	Redis      *redistest.Server
	Manager    *Manager
	Kubelet    *Kubelet
	// EnforcerImage is the image that runs as the enforcer binary.
	EnforcerImage string
	assets        string
	root          string
	kubeletLog    *os.File

	cp        *controlPlane
	streaming *streamingServer
	reap      *reaper
	cancel    context.CancelFunc
	once      sync.Once
}

// Scheme knows the core types and RateLimitPolicy.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}

// Start starts the stack; on error, whatever it started is stopped.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	if opts.Root == "" {
		if opts.Root, err = proc.Root(); err != nil {
			return nil, err
		}
	}
	if opts.Assets == "" {
		if opts.Assets, err = envtestutil.Assets(opts.Root); err != nil {
			return nil, err // before anything starts
		}
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.PodNetwork == ([3]byte{}) {
		opts.PodNetwork = [3]byte{127, byte(10 + rand.IntN(240)), byte(rand.IntN(256))}
	}
	if opts.EnforcerImage == "" {
		opts.EnforcerImage = "sluice-enforcer:dev"
	}
	if opts.StatusInterval == 0 {
		opts.StatusInterval = time.Second
	}
	dir, err := os.MkdirTemp("", "sluice-stack-")
	if err != nil {
		return nil, err
	}
	s := &Stack{Dir: dir, EnforcerImage: opts.EnforcerImage, assets: opts.Assets, root: opts.Root}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.reap, err = startReaper(); err != nil {
		return nil, err
	}
	managerBin, enforcerBin, ordersBin, err := buildBinaries(opts.Root, filepath.Join(dir, "bin"), opts.Progress)
	if err != nil {
		return nil, err
	}

	fmt.Fprintln(opts.Progress, "starting etcd and kube-apiserver")
	_, statErr := os.Stat(filepath.Join(opts.Root, "config", "webhook"))
	if s.cp, err = startControlPlane(opts.Root, opts.Assets, dir, statErr == nil, s.reap); err != nil {
		return nil, err
	}
	s.Kubeconfig, s.Config = s.cp.kubeconfig, s.cp.config
	if s.Client, err = client.New(s.Config, client.Options{Scheme: Scheme()}); err != nil {
		return nil, err
	}

	fmt.Fprintln(opts.Progress, "starting redis-server")
	if s.Redis, err = redistest.New(); err != nil {
		return nil, err
	}

	fmt.Fprintln(opts.Progress, "starting sluice-manager")
	webhookPort, _ := s.cp.webhook()
	if s.Manager, err = newManager(managerBin, dir, s.managerArgs(opts), webhookPort); err != nil {
		return nil, err
	}
	if err = s.Manager.Start(ctx); err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	images := map[string]string{opts.EnforcerImage: enforcerBin, OrdersImage: ordersBin}
	if s.kubeletLog, err = os.Create(filepath.Join(dir, "kubelet.log")); err != nil {
		return nil, err
	}
	if s.Kubelet, err = newKubelet(s.Config, Scheme(), filepath.Join(dir, "pods"), images, newIPAllocator(opts.PodNetwork), s.kubeletLog); err != nil {
		return nil, err
	}
	if err = s.Kubelet.start(runCtx); err != nil {
		return nil, err
	}
	s.streaming = startStreamingServer(s.Kubelet)
	if err = s.registerNode(ctx, s.streaming.server.Listener.Addr().String()); err != nil {
		return nil, err
	}
	return s, nil
}

// managerArgs is the manager's command line: the control plane's
// kubeconfig, the webhook on the address the API server calls, the local
// Redis as the default, and a fast status poll.
func (s *Stack) managerArgs(opts Options) []string {
	port, certDir := s.cp.webhook()
	args := []string{
		"--kubeconfig=" + s.Kubeconfig,
		"--default-redis-url=" + s.Redis.URL(),
		"--enforcer-image=" + opts.EnforcerImage,
		"--status-interval=" + opts.StatusInterval.String(),
		// envtest made the serving certificate and put its CA in the
		// webhook configuration, which calls https://127.0.0.1:<port>.
		"--webhook-cert-self-managed=false",
		"--webhook-cert-dir=" + certDir,
		fmt.Sprintf("--webhook-port=%d", port),
	}
	return append(args, opts.ManagerArgs...)
}

// StopAPIServer stops kube-apiserver: the API is unavailable until
// StartAPIServer, while etcd keeps the cluster's state.
func (s *Stack) StopAPIServer() error { return s.cp.StopAPIServer() }

// StartAPIServer starts kube-apiserver again and waits until it serves.
func (s *Stack) StartAPIServer(ctx context.Context) error { return s.cp.StartAPIServer(ctx) }

// Kubectl runs kubectl (from the envtest assets, else PATH) against the
// stack and returns its combined output.
func (s *Stack) Kubectl(ctx context.Context, args ...string) (string, error) {
	bin := filepath.Join(s.assets, "kubectl")
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("kubectl"); err != nil {
			return "", errors.New("kubectl is neither in " + s.assets + " nor on PATH")
		}
	}
	out, err := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig=" + s.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %v: %w: %s", args, err, out)
	}
	return string(out), nil
}

// Close stops everything in reverse order and removes Dir. It can be
// called more than once.
func (s *Stack) Close() {
	s.once.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
		if s.streaming != nil {
			s.streaming.close()
		}
		if s.Kubelet != nil {
			s.Kubelet.stopAll()
		}
		if s.Manager != nil {
			s.Manager.Stop()
		}
		if s.Redis != nil {
			s.Redis.Close()
		}
		if s.cp != nil {
			s.cp.stop()
		}
		if s.reap != nil {
			s.reap.disarm()
		}
		if s.kubeletLog != nil {
			_ = s.kubeletLog.Close()
		}
		_ = os.RemoveAll(s.Dir)
	})
}
