//go:build scale

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

// Package scale measures the policy controller at scale: a documented run,
// not a timed assertion. It starts envtest, runs the real sluice-manager
// binary against it and reports how long the namespaces take to converge and
// how much memory the manager uses (docs/performance.md, "Controller scale").
//
//	KUBEBUILDER_ASSETS=$PWD/bin/k8s go test -tags scale -run TestScale -v -timeout 30m ./test/envtest/controllers/scale/
//
// SCALE_MANAGER_ARGS adds flags to the manager, such as --kube-api-qps=200.
package scale

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/envtestutil"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// metricsAddr serves the manager's metrics, read for the reconcile and
// request counts.
const metricsAddr = "127.0.0.1:18080"

const (
	namespaces          = 100
	policiesPerNS       = 10
	podsPerNS           = 10
	creators            = 16
	convergencePollTime = 250 * time.Millisecond
)

var root = filepath.Join("..", "..", "..", "..")

func TestScale(t *testing.T) {
	ctx := context.Background()
	c, manager, kubeconfig, dir := startScaleEnv(t)

	samples := readSamples(t)
	t.Logf("machine: %d CPUs, %s; %d namespaces x (%d policies + %d pods)", runtime.NumCPU(), runtime.Version(), namespaces, policiesPerNS, podsPerNS)

	// Everything created while the manager runs.
	proc := startManager(t, manager, kubeconfig, dir)
	start := time.Now()
	createAll(ctx, t, c, samples)
	created := time.Since(start)
	waitConverged(ctx, t, c)
	t.Logf("manager metrics: %s", counters(t))
	t.Logf("created %d policies and %d pods in %s; every namespace published and every policy Accepted %s after the first create; manager %s",
		namespaces*policiesPerNS, namespaces*podsPerNS, created.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), memory(proc.Process.Pid))

	// Cold start: everything exists before the manager starts, as after an
	// upgrade or a failover, and every ConfigMap has to be written again.
	_ = proc.Process.Signal(os.Interrupt)
	_ = proc.Wait()
	for n := range namespaces {
		must(t, c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(fmt.Sprintf("scale-%03d", n)),
			client.MatchingLabels{wellknown.ManagedByLabel: wellknown.ManagedByValue}))
	}
	proc = startManager(t, manager, kubeconfig, dir)
	start = time.Now()
	waitConverged(ctx, t, c)
	t.Logf("manager metrics: %s", counters(t))
	t.Logf("cold start with %d ConfigMaps to write: converged %s after the manager started; manager %s",
		namespaces, time.Since(start).Round(time.Millisecond), memory(proc.Process.Pid))

	// Steady state: one edit per namespace, all at once.
	start = time.Now()
	editAll(ctx, t, c)
	waitConverged(ctx, t, c)
	t.Logf("manager metrics: %s", counters(t))
	t.Logf("edit of one policy in each of %d namespaces: converged in %s; manager %s",
		namespaces, time.Since(start).Round(time.Millisecond), memory(proc.Process.Pid))

	// Idle for a while: nothing should keep the manager busy.
	time.Sleep(10 * time.Second)
	t.Logf("after 10s idle: manager %s, %s CPU in total", memory(proc.Process.Pid), cpuTime(proc.Process.Pid))
	_ = proc.Process.Signal(os.Interrupt)
	_ = proc.Wait()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readSamples(t *testing.T) []*v1alpha1.RateLimitPolicy {
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "ratelimitpolicy_*.yaml"))
	must(t, err)
	var out []*v1alpha1.RateLimitPolicy
	for _, f := range files {
		data, err := os.ReadFile(f)
		must(t, err)
		p := &v1alpha1.RateLimitPolicy{}
		must(t, yaml.UnmarshalStrict(data, p))
		out = append(out, p)
	}
	return out
}

// createAll creates the namespaces, then their pods and policies in parallel.
func createAll(ctx context.Context, t *testing.T, c client.Client, samples []*v1alpha1.RateLimitPolicy) {
	work := make(chan client.Object)
	var wg sync.WaitGroup
	errs := make(chan error, creators)
	for range creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for obj := range work {
				if err := c.Create(ctx, obj); err != nil {
					select {
					case errs <- fmt.Errorf("create %s: %w", obj.GetName(), err):
					default:
					}
				}
			}
		}()
	}
	for n := range namespaces {
		ns := fmt.Sprintf("scale-%03d", n)
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		for i := range policiesPerNS {
			p := samples[i%len(samples)].DeepCopy()
			p.Namespace = ns
			p.Name = fmt.Sprintf("%s-%d", p.Name, i)
			work <- p
		}
		for i := range podsPerNS {
			app := samples[i%len(samples)].Spec.Selector.MatchLabels
			work <- &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: ns, Labels: app},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
			}
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// editAll changes one policy's limit in every namespace.
func editAll(ctx context.Context, t *testing.T, c client.Client) {
	name := "public-api-" + strconv.Itoa(publicAPIIndex(ctx, t, c))
	for n := range namespaces {
		p := &v1alpha1.RateLimitPolicy{}
		must(t, c.Get(ctx, client.ObjectKey{Namespace: fmt.Sprintf("scale-%03d", n), Name: name}, p))
		p.Spec.Rules[0].Limits[0].Requests++
		must(t, c.Update(ctx, p))
	}
}

func publicAPIIndex(ctx context.Context, t *testing.T, c client.Client) int {
	var list v1alpha1.RateLimitPolicyList
	must(t, c.List(ctx, &list, client.InNamespace("scale-000")))
	for _, p := range list.Items {
		if rest, ok := strings.CutPrefix(p.Name, "public-api-"); ok {
			i, err := strconv.Atoi(rest)
			must(t, err)
			return i
		}
	}
	t.Fatal("no public-api policy")
	return 0
}

// waitConverged waits until every namespace's ConfigMap holds the current
// generation of all its policies and every policy says so in its status.
func waitConverged(ctx context.Context, t *testing.T, c client.Client) {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		published, accepted := converged(ctx, t, c)
		if published == namespaces && accepted == namespaces*policiesPerNS {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged after 10m: %d/%d namespaces published, %d/%d policies accepted",
				published, namespaces, accepted, namespaces*policiesPerNS)
		}
		time.Sleep(convergencePollTime)
	}
}

func converged(ctx context.Context, t *testing.T, c client.Client) (published, accepted int) {
	var policies v1alpha1.RateLimitPolicyList
	must(t, c.List(ctx, &policies))
	generations := map[string]int64{}
	for _, p := range policies.Items {
		generations[p.Namespace+"/"+p.Name] = p.Generation
		cond := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionAccepted)
		if p.Status.ObservedGeneration == p.Generation && cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == p.Generation {
			accepted++
		}
	}
	var cms corev1.ConfigMapList
	must(t, c.List(ctx, &cms, client.MatchingLabels{wellknown.ManagedByLabel: wellknown.ManagedByValue}))
	for _, cm := range cms.Items {
		cfg, err := config.Parse([]byte(cm.Data[wellknown.ConfigKey]))
		if err != nil || len(cfg.Policies) != policiesPerNS {
			continue
		}
		current := true
		for _, p := range cfg.Policies {
			current = current && generations[cm.Namespace+"/"+p.Name] == p.Generation && p.Replicas > 0
		}
		if current {
			published++
		}
	}
	return published, accepted
}

func startManager(t *testing.T, bin, kubeconfig, dir string) *exec.Cmd {
	logFile, err := os.Create(filepath.Join(dir, "manager.log"))
	must(t, err)
	args := []string{"--kubeconfig", kubeconfig, "--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=0", "--zap-log-level=error"}
	args = append(args, strings.Fields(os.Getenv("SCALE_MANAGER_ARGS"))...)
	t.Logf("sluice-manager %s", strings.Join(args[2:], " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if data, err := os.ReadFile(logFile.Name()); err == nil && len(data) > 0 {
			t.Logf("manager log:\n%s", data)
		}
	})
	return cmd
}

// memory reads the manager's resident set: now and at its peak.
func memory(pid int) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "memory unknown (no /proc)"
	}
	defer f.Close()
	fields := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fmt.Sprintf("RSS %s (peak %s)", fields["VmRSS"], fields["VmHWM"])
}

// cpuTime is the manager's user+system CPU time.
func cpuTime(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.Atoi(fields[11])
	stime, _ := strconv.Atoi(fields[12])
	return (time.Duration(utime+stime) * 10 * time.Millisecond).String() // USER_HZ is 100 on Linux
}

// counters sums the manager's reconciles by result and its API requests by
// verb since it started.
func counters(t *testing.T) string {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return "unavailable: " + err.Error()
	}
	defer resp.Body.Close()
	sums := map[string]float64{}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		for _, prefix := range []string{"controller_runtime_reconcile_total{", "rest_client_requests_total{"} {
			if !strings.HasPrefix(line, prefix) {
				continue
			}
			labels, value, _ := strings.Cut(line[len(prefix):], "} ")
			v, _ := strconv.ParseFloat(value, 64)
			for _, l := range strings.Split(labels, ",") {
				if k, lv, _ := strings.Cut(l, "="); k == "result" || k == "method" {
					sums[strings.TrimSuffix(prefix, "{")+" "+strings.Trim(lv, `"`)] += v
				}
			}
		}
	}
	keys := make([]string, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		if sums[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%g", k, sums[k]))
		}
	}
	return strings.Join(parts, " ")
}

// startScaleEnv starts envtest (stopped when t ends), builds sluice-manager
// and writes a kubeconfig for it in a temporary directory, and returns a
// client that is not rate limited, the manager binary, the kubeconfig and
// the directory.
func startScaleEnv(t *testing.T) (c client.Client, manager, kubeconfig, dir string) {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "k8s")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest from %s: %v", assets, err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	dir = t.TempDir()
	kubeconfig = filepath.Join(dir, "kubeconfig")
	must(t, envtestutil.WriteAdminKubeconfig(env, cfg, kubeconfig))
	manager = filepath.Join(dir, "sluice-manager")
	build := exec.Command("go", "build", "-o", manager, "./cmd/manager")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build sluice-manager: %v\n%s", err, out)
	}

	scheme := k8sruntime.NewScheme()
	must(t, clientgoscheme.AddToScheme(scheme))
	must(t, v1alpha1.AddToScheme(scheme))
	fast := rest.CopyConfig(cfg)
	fast.QPS, fast.Burst = 1000, 2000
	c, err = client.New(fast, client.Options{Scheme: scheme})
	must(t, err)
	return c, manager, kubeconfig, dir
}
