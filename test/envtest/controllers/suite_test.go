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

// Package controllers runs the policy controller, with the status
// controller as cmd/manager runs them, in-process against a real
// kube-apiserver and etcd, with the RBAC that config/rbac grants them: what
// users see of the policy controller (ConfigMaps, conditions, Events) is
// what these specs check.
package controllers

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
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

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers"
	"github.com/sluice-dev/sluice/internal/testing/envtestutil"
)

// managerUser is who the manager runs as: bound to config/rbac/role.yaml only.
const managerUser = "system:serviceaccount:sluice-system:sluice-manager"

var (
	root      = filepath.Join("..", "..", "..")
	testEnv   *envtest.Environment
	scheme    = runtime.NewScheme()
	k8sClient client.Client
	// kubeconfig is an admin kubeconfig file for the real kubectl.
	kubeconfig string
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Policy Controller Suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(2 * time.Second)

	assets, err := envtestutil.Assets(root)
	Expect(err).NotTo(HaveOccurred())
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
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

	startManager(managerConfig(ctx, cfg))
})

// managerConfig grants a user the generated roles of config/rbac and returns
// its rest.Config, so a marker missing from a controller fails here.
func managerConfig(ctx context.Context, cfg *rest.Config) *rest.Config {
	user, err := envtestutil.ManagerUser(ctx, k8sClient, testEnv, cfg, filepath.Join(root, "config", "rbac", "role.yaml"), managerUser)
	Expect(err).NotTo(HaveOccurred())
	return user
}

// startManager runs the controllers as cmd/manager wires them, with leader
// election through a Lease in sluice-system; without an enforcer image,
// the webhook is not served.
func startManager(cfg *rest.Config) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			ByObject:         controllers.CacheByObject(),
			DefaultTransform: cache.TransformStripManagedFields(),
		},
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		LeaderElection:                true,
		LeaderElectionID:              "sluice-manager.sluice.dev",
		LeaderElectionNamespace:       "sluice-system",
		LeaderElectionReleaseOnCancel: true,
	})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	_, err = controllers.Setup(ctx, mgr, controllers.Options{Concurrency: 2})
	Expect(err).NotTo(HaveOccurred())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		<-done
	})
}
