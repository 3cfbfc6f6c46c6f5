/*
Copyright 2026 The Sluice Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package injection runs the injection webhook, the policy controller and
// the status controller in-process against a real kube-apiserver and etcd,
// with the webhook configuration of config/webhook installed through
// envtest, real Redis and real sluice-enforcer processes standing in for
// the injected sidecars.
package injection

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers"
	"github.com/sluice-dev/sluice/controllers/webhook"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/testing/envtestutil"
	"github.com/sluice-dev/sluice/internal/testing/freeport"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// managerUser is who the manager runs as: bound to config/rbac/role.yaml only.
const managerUser = "system:serviceaccount:sluice-system:sluice-manager"

// The webhook settings the manager is started with, which it writes into
// the installed webhook configuration.
const (
	webhookFailurePolicy  = admissionregistrationv1.Fail
	webhookTimeoutSeconds = 10
)

var (
	root      = filepath.Join("..", "..", "..")
	testEnv   *envtest.Environment
	scheme    = runtime.NewScheme()
	k8sClient client.Client
	// kubeconfig is an admin kubeconfig file for the real kubectl.
	kubeconfig string
	// redis is the operator's default Redis, injected as SLUICE_REDIS_URL.
	redis *redistest.Server
	// sidecar is what the webhook injects; its ports are free on the
	// loopback addresses the enforcers listen on.
	sidecar inject.EnforcerSidecar
	// enforcerBin is sluice-enforcer built from ./cmd/enforcer; empty when
	// that does not exist.
	enforcerBin string
)

// enforcerIPs are the pod IPs of the enforcer processes.
var enforcerIPs = []string{"127.0.0.2", "127.0.0.3"}

func TestInjection(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Injection and Enforcer Status Suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(time.Second)

	var err error
	redis, err = redistest.New()
	Expect(err).NotTo(HaveOccurred(), "start redis-server (make redis installs it)")
	DeferCleanup(redis.Close)
	enforcerBin = buildEnforcer()

	httpPort, adminPort := freePort(enforcerIPs), freePort(enforcerIPs)
	for adminPort == httpPort {
		adminPort = freePort(enforcerIPs)
	}
	sidecar = inject.EnforcerSidecar{
		Image:           "sluice-enforcer:test",
		ImagePullPolicy: corev1.PullIfNotPresent,
		HTTPPort:        httpPort,
		AdminPort:       adminPort,
		RunAsUser:       65532,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("48Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
		DefaultRedisURL: redis.URL(),
	}

	assets, err := envtestutil.Assets(root)
	Expect(err).NotTo(HaveOccurred())
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		// The generated webhook configuration, pointed at the in-process
		// webhook server with envtest's own certificate.
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook", "manifests.yaml")}},
	}
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred(), "start kube-apiserver and etcd from %s (make envtest builds them)", assets)
	DeferCleanup(testEnv.Stop)

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(envtestutil.WriteAdminKubeconfig(testEnv, cfg, kubeconfig)).To(Succeed())

	startManager(ctx, managerConfig(ctx, cfg))
})

// startManager runs the webhook and the controllers as cmd/manager wires
// them, with the webhook server on envtest's address and certificate
// instead of the certificate rotator.
func startManager(ctx context.Context, cfg *rest.Config) {
	wio := &testEnv.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			ByObject:         controllers.CacheByObject(),
			DefaultTransform: cache.TransformStripManagedFields(),
		},
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{
			Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir,
		}),
	})
	Expect(err).NotTo(HaveOccurred())
	mgrCtx, cancel := context.WithCancel(context.Background())
	webhookReady, err := controllers.Setup(mgrCtx, mgr, controllers.Options{
		Concurrency:    2,
		Sidecar:        sidecar,
		StatusInterval: 500 * time.Millisecond,
		Webhook: controllers.WebhookOptions{
			FailurePolicy:  webhookFailurePolicy,
			TimeoutSeconds: webhookTimeoutSeconds,
			Certificates:   webhook.Certificates{SelfManaged: false},
		},
	})
	Expect(err).NotTo(HaveOccurred())

	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mgrCtx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		<-done
	})
	Eventually(func() error { return webhookReady(nil) }).Should(Succeed(), "the webhook server serves")
	Eventually(func() error {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(wio.LocalServingHost, fmt.Sprint(wio.LocalServingPort)), time.Second)
		if err == nil {
			_ = conn.Close()
		}
		return err
	}).WithContext(ctx).Should(Succeed())
}

// managerConfig grants a user the generated roles of config/rbac and returns
// its rest.Config, so a marker missing from a controller fails here.
func managerConfig(ctx context.Context, cfg *rest.Config) *rest.Config {
	user, err := envtestutil.ManagerUser(ctx, k8sClient, testEnv, cfg, filepath.Join(root, "config", "rbac", "role.yaml"), managerUser)
	Expect(err).NotTo(HaveOccurred())
	return user
}

// buildEnforcer builds ./cmd/enforcer into a temporary directory; empty when
// the command does not exist in this tree.
func buildEnforcer() string {
	if _, err := os.Stat(filepath.Join(root, "cmd", "enforcer")); err != nil {
		return ""
	}
	bin := filepath.Join(GinkgoT().TempDir(), "sluice-enforcer")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/enforcer")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build ./cmd/enforcer: %s", out)
	return bin
}

// freePort returns a TCP port free on every one of ips.
func freePort(ips []string) int32 {
	ports, err := freeport.On(ips, 1)
	Expect(err).NotTo(HaveOccurred(), "the loopback range must be usable")
	return int32(ports[0])
}
