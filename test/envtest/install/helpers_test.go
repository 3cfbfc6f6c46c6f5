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

package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sluice-dev/sluice/internal/testing/freeport"
)

// run runs a binary in the repository root and returns its combined output.
func run(bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(helmHome, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME="+filepath.Join(helmHome, "data"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// helm runs the real helm against the envtest API server.
func helm(args ...string) (string, error) {
	return run(helmBin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
}

// mustHelm runs helm and fails the spec, with helm's output, if it fails.
func mustHelm(args ...string) string {
	out, err := helm(args...)
	Expect(err).NotTo(HaveOccurred(), "helm %s:\n%s", strings.Join(args, " "), out)
	return out
}

// kubectl runs the real kubectl as an admin.
func kubectl(args ...string) (string, error) {
	return run(kubectlBin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
}

func mustKubectl(args ...string) string {
	out, err := kubectl(args...)
	Expect(err).NotTo(HaveOccurred(), "kubectl %s:\n%s", strings.Join(args, " "), out)
	return out
}

// decodeObjects parses a multi-document YAML stream, skipping empty documents.
func decodeObjects(manifest string) []*unstructured.Unstructured {
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		Expect(err).NotTo(HaveOccurred())
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// releaseObjects are the objects of the installed release, as helm recorded them.
func releaseObjects() []*unstructured.Unstructured {
	return decodeObjects(mustHelm("get", "manifest", release, "-n", releaseNamespace))
}

// objectKey names an object for comparisons and failure messages.
func objectKey(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetKind() + " " + obj.GetName()
	}
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

func objectKeys(objs []*unstructured.Unstructured) []string {
	keys := make([]string, 0, len(objs))
	for _, obj := range objs {
		keys = append(keys, objectKey(obj))
	}
	sort.Strings(keys)
	return keys
}

func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, obj := range objs {
		out = append(out, obj.GetKind())
	}
	return out
}

// expectInCluster checks that the API server holds every object.
func expectInCluster(ctx context.Context, objs []*unstructured.Unstructured) {
	for _, want := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(want.GroupVersionKind())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(want), got)).To(Succeed(), "%s is not in the API server", objectKey(want))
	}
}

// managerDeployment finds the manager's Deployment among objs.
func managerDeployment(objs []*unstructured.Unstructured) *appsv1.Deployment {
	for _, obj := range objs {
		if obj.GetKind() == "Deployment" && obj.GetLabels()["app.kubernetes.io/component"] == "manager" {
			d := &appsv1.Deployment{}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d)).To(Succeed())
			return d
		}
	}
	Fail("no manager Deployment among " + strings.Join(objectKeys(objs), ", "))
	return nil
}

// expectManagerAcceptsArgs runs the real sluice-manager with the args of the
// rendered Deployment and --version: it exits 0 only when every flag exists
// and every value passes its validation.
func expectManagerAcceptsArgs(objs []*unstructured.Unstructured) {
	d := managerDeployment(objs)
	Expect(d.Spec.Template.Spec.Containers).NotTo(BeEmpty())
	args := d.Spec.Template.Spec.Containers[0].Args
	out, err := run(managerBin, append(append([]string{}, args...), "--version")...)
	Expect(err).NotTo(HaveOccurred(), "sluice-manager refuses the chart's args %q:\n%s", args, out)
	Expect(out).To(ContainSubstring("sluice-manager"))
}

// runningManager is a sluice-manager process started by startManager.
type runningManager struct {
	cmd *exec.Cmd
	// probes is the address of /healthz and /readyz.
	probes string
	// certDir stands in for the mounted certificate Secret.
	certDir string
}

// startManager runs the real sluice-manager with the chart's args for it,
// as the chart's ServiceAccount: a permission the chart fails to grant, or a
// name it passes wrong, fails here. Only what differs outside a pod is
// overridden: the kubeconfig, free local ports, a temporary certificate
// directory, and the leader election namespace (in a pod, the manager reads
// it from its ServiceAccount).
func startManager(objs []*unstructured.Unstructured) *runningManager {
	user, err := testEnv.AddUser(envtest.User{Name: managerUser}, cfg)
	Expect(err).NotTo(HaveOccurred())
	data, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	dir := GinkgoT().TempDir()
	userConfig := filepath.Join(dir, "kubeconfig")
	Expect(os.WriteFile(userConfig, data, 0o600)).To(Succeed())

	addrs := freeAddresses(2)
	m := &runningManager{probes: addrs[0], certDir: filepath.Join(dir, "certs")}
	Expect(os.Mkdir(m.certDir, 0o700)).To(Succeed())
	_, webhookPort, err := net.SplitHostPort(addrs[1])
	Expect(err).NotTo(HaveOccurred())
	args := append(managerDeployment(objs).Spec.Template.Spec.Containers[0].Args,
		"--kubeconfig="+userConfig,
		"--metrics-bind-address=0",
		"--health-probe-bind-address="+m.probes,
		"--webhook-port="+webhookPort,
		"--webhook-cert-dir="+m.certDir,
		"--leader-election-namespace="+releaseNamespace)
	m.cmd = exec.Command(managerBin, args...)
	m.cmd.Stdout, m.cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(m.cmd.Start()).To(Succeed())
	return m
}

// stop ends the manager as the kubelet does, with SIGTERM.
func (m *runningManager) stop() {
	Expect(m.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	_ = m.cmd.Wait()
}

// mountCertificate copies the certificate Secret into the certificate
// directory, as the kubelet does with the manager's Secret volume.
func (m *runningManager) mountCertificate(secret *corev1.Secret) {
	for name, data := range secret.Data {
		Expect(os.WriteFile(filepath.Join(m.certDir, name), data, 0o600)).To(Succeed())
	}
}

// ready is the manager's readiness probe.
func (m *runningManager) ready() (int, error) {
	resp, err := http.Get("http://" + m.probes + "/readyz")
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	return resp.StatusCode, nil
}

// freeAddresses are n distinct free loopback addresses.
func freeAddresses(n int) []string {
	addrs, err := freeport.LoopbackAddrs(n)
	Expect(err).NotTo(HaveOccurred())
	return addrs
}

// sampleFiles are the sample policies, without config/samples' kustomization.
func sampleFiles() []string {
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "ratelimitpolicy_*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(files).NotTo(BeEmpty())
	return files
}

// sampleNames are the names of the sample policies.
func sampleNames() []string {
	var names []string
	for _, f := range sampleFiles() {
		data, err := os.ReadFile(f)
		Expect(err).NotTo(HaveOccurred())
		for _, obj := range decodeObjects(string(data)) {
			names = append(names, obj.GetName())
		}
	}
	return names
}

// fileArgs turns files into kubectl -f arguments.
func fileArgs(files []string) []string {
	var args []string
	for _, f := range files {
		args = append(args, "-f", f)
	}
	return args
}

// resourceVersions maps each policy of namespace to its resourceVersion.
func resourceVersions(namespace string) map[string]string {
	out := mustKubectl("get", "rlp", "-n", namespace, "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.resourceVersion}{"\n"}{end}`)
	versions := map[string]string{}
	for _, line := range strings.Fields(out) {
		name, version, _ := strings.Cut(line, "=")
		versions[name] = version
	}
	return versions
}

// valuesFile writes values into a temporary file for helm -f.
func valuesFile(values string) string {
	path := filepath.Join(GinkgoT().TempDir(), "values.yaml")
	Expect(os.WriteFile(path, []byte(values), 0o600)).To(Succeed())
	return path
}

// ciValuesFiles names the chart's scenario values files (in charts/sluice/ci).
// The spec tree is built before BeforeSuite, from the package directory.
func ciValuesFiles() []string {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "charts", "sluice", "ci", "*.yaml"))
	if err != nil || len(files) == 0 {
		panic(fmt.Sprintf("no charts/sluice/ci/*.yaml: %v", err))
	}
	for i, f := range files {
		files[i] = filepath.Base(f)
	}
	return files
}

// diffOutput is kubectl diff's verdict: no output and exit status 0 mean
// the cluster already matches.
func diffOutput(args ...string) (string, int) {
	out, err := kubectl(append([]string{"diff"}, args...)...)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out, exit.ExitCode()
	}
	Expect(err).NotTo(HaveOccurred(), out)
	return out, 0
}
