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

package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// unreachableNamespaces is how many of the namespaces, 10 %, have pods
// whose enforcer port accepts connections and never answers.
const unreachableNamespaces = namespaces / 10

// TestStatusAtScale measures how long the status controller takes, from a
// cold start, to report every enforcer ready in the namespaces whose
// enforcers answer: once with every pod answering, once with the pods of
// 10 % of the namespaces unreachable. Stand-in enforcers on loopback answer
// /status with the namespace's published configuration; pods get
// 127.0.0.1 as their IP and their namespace's port as sluice-admin.
func TestStatusAtScale(t *testing.T) {
	logf.SetLogger(logr.Discard())
	for _, unreachable := range []int{0, unreachableNamespaces} {
		t.Run(fmt.Sprintf("unreachable-namespaces-%d", unreachable), func(t *testing.T) {
			measureStatus(t, unreachable)
		})
	}
}

func measureStatus(t *testing.T, unreachable int) {
	ctx := context.Background()
	c, manager, kubeconfig, dir := startScaleEnv(t)

	enforcers := newStandInEnforcers(t, c)
	defer enforcers.close()
	ports := make([]int32, namespaces)
	for n := range namespaces {
		if n < unreachable {
			ports[n] = enforcers.silentPort
		} else {
			ports[n] = enforcers.listen(t, fmt.Sprintf("scale-%03d", n))
		}
	}

	// Everything exists before the manager starts, as after an upgrade.
	createWithEnforcers(ctx, t, c, readSamples(t), ports)
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	go enforcers.follow(followCtx)
	proc := startManager(t, manager, kubeconfig, dir)
	start := time.Now()
	reachable := waitEnforcersReady(ctx, t, c, unreachable)
	t.Logf("%d pods in %d namespaces, %d unreachable: every policy of the %d reachable namespaces Ready %s after the manager started; manager %s",
		namespaces*podsPerNS, namespaces, unreachable*podsPerNS, reachable, time.Since(start).Round(time.Millisecond), memory(proc.Process.Pid))
	if unreachable > 0 {
		waitUnreachableReported(ctx, t, c, unreachable)
		t.Logf("every policy of the %d unreachable namespaces reports its enforcers not ready %s after the manager started",
			unreachable, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("manager metrics: %s", counters(t))
	_ = proc.Process.Signal(os.Interrupt)
	_ = proc.Wait()
}

// createWithEnforcers creates the namespaces with their policies and pods
// whose sluice-enforcer container's admin port is the namespace's entry in
// ports, then gives every pod 127.0.0.1 as its IP, as a kubelet would.
func createWithEnforcers(ctx context.Context, t *testing.T, c client.Client, samples []*v1alpha1.RateLimitPolicy, ports []int32) {
	work := make(chan func() error)
	var wg sync.WaitGroup
	errs := make(chan error, creators)
	for range creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for do := range work {
				if err := do(); err != nil {
					select {
					case errs <- err:
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
			work <- func() error { return c.Create(ctx, p) }
		}
		for i := range podsPerNS {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: ns, Labels: samples[i%len(samples)].Spec.Selector.MatchLabels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "app", Image: "app:1"},
					{Name: wellknown.EnforcerContainerName, Image: "enforcer:1",
						Ports: []corev1.ContainerPort{{Name: wellknown.AdminPortName, ContainerPort: ports[n]}}},
				}},
			}
			work <- func() error {
				if err := c.Create(ctx, pod); err != nil {
					return fmt.Errorf("create pod %s/%s: %w", pod.Namespace, pod.Name, err)
				}
				pod.Status.Phase = corev1.PodRunning
				pod.Status.PodIP = "127.0.0.1"
				pod.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
				if err := c.Status().Update(ctx, pod); err != nil {
					return fmt.Errorf("set the IP of pod %s/%s: %w", pod.Namespace, pod.Name, err)
				}
				return nil
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

// waitEnforcersReady waits until every policy of the namespaces from
// scale-<unreachable> on is Ready with all its selected enforcers up to
// date, and returns how many namespaces that is. The bound is generous: the
// time is reported, not asserted.
func waitEnforcersReady(ctx context.Context, t *testing.T, c client.Client, unreachable int) int {
	want := (namespaces - unreachable) * policiesPerNS
	deadline := time.Now().Add(10 * time.Minute)
	for {
		ready := 0
		for _, p := range listPolicies(ctx, t, c, unreachable, namespaces) {
			cond := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			if cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == p.Generation &&
				p.Status.Enforcers.Selected > 0 && p.Status.Enforcers.UpToDate == p.Status.Enforcers.Selected {
				ready++
			}
		}
		if ready == want {
			return namespaces - unreachable
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged after 10m: %d/%d policies of the reachable namespaces Ready", ready, want)
		}
		time.Sleep(convergencePollTime)
	}
}

// waitUnreachableReported waits until every policy of the first
// unreachable namespaces counts its enforcers injected and none ready.
func waitUnreachableReported(ctx context.Context, t *testing.T, c client.Client, unreachable int) {
	want := unreachable * policiesPerNS
	deadline := time.Now().Add(10 * time.Minute)
	for {
		reported := 0
		for _, p := range listPolicies(ctx, t, c, 0, unreachable) {
			cond := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			if cond != nil && cond.Status == metav1.ConditionFalse && p.Status.Enforcers.Injected > 0 && p.Status.Enforcers.Ready == 0 {
				reported++
			}
		}
		if reported == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10m only %d/%d policies of the unreachable namespaces report their enforcers", reported, want)
		}
		time.Sleep(convergencePollTime)
	}
}

// listPolicies lists the policies of namespaces scale-<from> to
// scale-<to-1>.
func listPolicies(ctx context.Context, t *testing.T, c client.Client, from, to int) []v1alpha1.RateLimitPolicy {
	var list v1alpha1.RateLimitPolicyList
	must(t, c.List(ctx, &list))
	var out []v1alpha1.RateLimitPolicy
	for _, p := range list.Items {
		var n int
		if _, err := fmt.Sscanf(p.Namespace, "scale-%03d", &n); err == nil && n >= from && n < to {
			out = append(out, p)
		}
	}
	return out
}

// standInEnforcers answers /status for the pods of each namespace on a
// loopback port of the namespace, from the configuration the manager
// published there, as an enforcer that loaded it would. silentPort accepts
// connections and never answers them.
type standInEnforcers struct {
	c          client.Client
	silentPort int32
	silent     net.Listener
	servers    []*http.Server

	mu     sync.Mutex
	status map[string][]byte
	held   []net.Conn
}

func newStandInEnforcers(t *testing.T, c client.Client) *standInEnforcers {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	e := &standInEnforcers{c: c, silent: silent, silentPort: int32(silent.Addr().(*net.TCPAddr).Port), status: map[string][]byte{}}
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.held = append(e.held, conn)
			e.mu.Unlock()
		}
	}()
	return e
}

// listen serves the namespace's /status on a new loopback port.
func (e *standInEnforcers) listen(t *testing.T, namespace string) int32 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		doc, ok := e.status[namespace]
		e.mu.Unlock()
		if r.URL.Path != "/status" || !ok {
			http.Error(w, `{"error":"no configuration loaded yet"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	})}
	e.servers = append(e.servers, srv)
	go func() { _ = srv.Serve(l) }()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// follow keeps each namespace's /status document in step with its
// published ConfigMap, as the kubelet and the enforcer's reload would.
func (e *standInEnforcers) follow(ctx context.Context) {
	for ctx.Err() == nil {
		var cms corev1.ConfigMapList
		if err := e.c.List(ctx, &cms, client.MatchingLabels{wellknown.ManagedByLabel: wellknown.ManagedByValue}); err == nil {
			for _, cm := range cms.Items {
				if doc, err := statusDocument(cm); err == nil {
					e.mu.Lock()
					e.status[cm.Namespace] = doc
					e.mu.Unlock()
				}
			}
		}
		time.Sleep(convergencePollTime)
	}
}

// statusDocument is the /status of a ready enforcer that loaded cm.
func statusDocument(cm corev1.ConfigMap) ([]byte, error) {
	cfg, err := config.Parse([]byte(cm.Data[wellknown.ConfigKey]))
	if err != nil {
		return nil, err
	}
	type policy struct {
		Name        string `json:"name"`
		UID         string `json:"uid"`
		Generation  int64  `json:"generation"`
		FailureMode string `json:"failureMode"`
	}
	doc := struct {
		Ready  bool `json:"ready"`
		Config struct {
			Hash string `json:"hash"`
		} `json:"config"`
		Policies []policy `json:"policies"`
	}{Ready: true}
	doc.Config.Hash = cm.Annotations[wellknown.ConfigHashAnnotation]
	for _, p := range cfg.Policies {
		doc.Policies = append(doc.Policies, policy{Name: p.Name, UID: p.UID, Generation: p.Generation, FailureMode: string(p.FailureMode)})
	}
	return json.Marshal(doc)
}

func (e *standInEnforcers) close() {
	for _, srv := range e.servers {
		_ = srv.Close()
	}
	_ = e.silent.Close()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, conn := range e.held {
		_ = conn.Close()
	}
}
