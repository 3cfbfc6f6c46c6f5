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

// Package install installs Sluice the ways users do, into a real
// kube-apiserver and etcd: the Helm chart with its default values and each
// ci/ values file, helm upgrade and uninstall, kubectl apply -k
// config/default, and the sample policies applied twice with server-side
// apply. The policy controller runs in-process as the chart's
// ServiceAccount, so it has exactly the permissions the chart grants.
package install

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/envtestutil"
)

const (
	// release and releaseNamespace are those config/default is rendered
	// with, so the kustomize install and the chart's share object names.
	release          = "sluice"
	releaseNamespace = "sluice-system"
	// managerUser is the chart's ServiceAccount as the API server sees it.
	managerUser = "system:serviceaccount:" + releaseNamespace + ":sluice-manager"
)

var (
	root      = filepath.Join("..", "..", "..")
	chartDir  = filepath.Join(root, "charts", "sluice")
	testEnv   *envtest.Environment
	cfg       *rest.Config
	scheme    = runtime.NewScheme()
	k8sClient client.Client
	// kubeconfig is an admin kubeconfig file for helm and kubectl.
	kubeconfig string
	// helmBin, kubectlBin and managerBin are the real binaries.
	helmBin, kubectlBin, managerBin string
	// helmHome keeps helm's cache and configuration out of $HOME.
	helmHome string
)

func TestInstall(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Install Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)

	var err error
	root, err = filepath.Abs(root)
	Expect(err).NotTo(HaveOccurred())
	chartDir = filepath.Join(root, "charts", "sluice")

	assets, err := envtestutil.Assets(root)
	Expect(err).NotTo(HaveOccurred())
	// No Sluice CRD here: the chart installs it. The Prometheus Operator
	// and cert-manager kinds the optional templates use get stand-ins.
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("testdata", "crds")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred(), "start kube-apiserver and etcd from %s (make envtest builds them)", assets)
	DeferCleanup(testEnv.Stop)

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	dir := GinkgoT().TempDir()
	kubeconfig = filepath.Join(dir, "kubeconfig")
	Expect(envtestutil.WriteAdminKubeconfig(testEnv, cfg, kubeconfig)).To(Succeed())
	helmHome = filepath.Join(dir, "helm")

	helmBin = filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(helmBin); err != nil {
		By("building helm into bin/ (hack/build-tool.sh, once)")
		build := exec.Command(filepath.Join(root, "hack", "build-tool.sh"), "helm", helmBin)
		build.Dir = root
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "build helm: %s", out)
	}
	kubectlBin, err = envtestutil.Kubectl(assets)
	Expect(err).NotTo(HaveOccurred())

	// The chart's manager args must be flags sluice-manager accepts.
	managerBin = filepath.Join(dir, "sluice-manager")
	build := exec.Command("go", "build", "-o", managerBin, "./cmd/manager")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "build sluice-manager: %s", out)
})
