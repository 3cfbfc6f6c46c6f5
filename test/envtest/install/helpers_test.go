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
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sluice-dev/sluice/controllers"
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

// startPolicyController runs the policy controller as cmd/manager wires it,
// as the chart's ServiceAccount with leader election in the release
// namespace: a permission the chart fails to grant fails here. It stops
// when the returned function is called.
func startPolicyController(cfg *rest.Config) (stop func()) {
	user, err := testEnv.AddUser(envtest.User{Name: managerUser}, cfg)
	Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(user.Config(), ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			ByObject:         controllers.CacheByObject(),
			DefaultTransform: cache.TransformStripManagedFields(),
		},
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		LeaderElection:                true,
		LeaderElectionID:              "sluice-manager.sluice.dev",
		LeaderElectionNamespace:       releaseNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	policies := &controllers.PolicyReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("sluice-policy-controller"),
	}
	Expect(policies.SetupWithManager(ctx, mgr, 2)).To(Succeed())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	return func() {
		cancel()
		<-done
	}
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
