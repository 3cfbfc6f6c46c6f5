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

package injection

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/envtestutil"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// newNamespace creates a namespace, labelled for injection when enabled.
func newNamespace(ctx context.Context, enabled bool) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shop-"}}
	if enabled {
		ns.Labels = map[string]string{wellknown.InjectionNamespaceLabel: wellknown.InjectionEnabled}
	}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// newPolicy is a policy selecting app=<app> that allows 3 requests a
// minute per client and forwards to upstreamPort.
func newPolicy(namespace, name, app string, upstreamPort int32) *v1alpha1.RateLimitPolicy {
	return &v1alpha1.RateLimitPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.RateLimitPolicySpec{
			Selector:     metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			UpstreamPort: upstreamPort,
			Rules: []v1alpha1.Rule{{Name: "api", Algorithm: v1alpha1.AlgorithmTokenBucket,
				Limits: []v1alpha1.Limit{{Requests: 3, Period: metav1.Duration{Duration: time.Minute}}}}},
		},
	}
}

// createPolicy creates p and waits until the policy controller accepted it:
// the manager's cache, which the webhook reads policies from, then has it.
func createPolicy(ctx context.Context, p *v1alpha1.RateLimitPolicy) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, p)).To(Succeed())
	Eventually(func() *metav1.Condition { return condition(ctx, p, v1alpha1.ConditionAccepted) }).ShouldNot(BeNil())
}

func newPod(namespace, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
	}
}

func key(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }

// enforcerOf is the pod's injected enforcer container, nil without one.
func enforcerOf(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == wellknown.EnforcerContainerName {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

func condition(ctx context.Context, p *v1alpha1.RateLimitPolicy, conditionType string) *metav1.Condition {
	current := &v1alpha1.RateLimitPolicy{}
	Expect(k8sClient.Get(ctx, key(p), current)).To(Succeed())
	return apimeta.FindStatusCondition(current.Status.Conditions, conditionType)
}

func enforcers(ctx context.Context, p *v1alpha1.RateLimitPolicy) v1alpha1.EnforcerCounts {
	current := &v1alpha1.RateLimitPolicy{}
	Expect(k8sClient.Get(ctx, key(p), current)).To(Succeed())
	return current.Status.Enforcers
}

// haveReady matches a Ready condition of the given generation.
func haveReady(status metav1.ConditionStatus, reason string, generation int64) OmegaMatcher {
	return And(Not(BeNil()),
		HaveField("Status", status), HaveField("Reason", reason), HaveField("ObservedGeneration", generation))
}

// eventsAbout lists the Events regarding the policy, oldest first.
func eventsAbout(ctx context.Context, p *v1alpha1.RateLimitPolicy) []eventsv1.Event {
	var list eventsv1.EventList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(p.Namespace))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "RateLimitPolicy" && e.Regarding.Name == p.Name {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b eventsv1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return out
}

// injectionEvents are the webhook's Events about p.
func injectionEvents(ctx context.Context, p *v1alpha1.RateLimitPolicy) []eventsv1.Event {
	return slices.DeleteFunc(eventsAbout(ctx, p), func(e eventsv1.Event) bool { return e.Action != "Inject" })
}

// eventNotes lists the notes of the Events about p with the reason.
func eventNotes(ctx context.Context, p *v1alpha1.RateLimitPolicy, reason string) []string {
	var notes []string
	for _, e := range eventsAbout(ctx, p) {
		if e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// enforcerProcess is a sluice-enforcer standing in for a pod's sidecar:
// started with the injected container's arguments and environment, on the
// pod's IP, with the ConfigMap volume, the downward API labels and the
// admin Secret's token as files.
type enforcerProcess struct {
	pod       *corev1.Pod
	ip        string
	dir       string
	args, env []string
	cmd       *exec.Cmd
	done      chan struct{}
}

func startEnforcer(ctx context.Context, pod *corev1.Pod, ip string) *enforcerProcess {
	c := enforcerOf(pod)
	Expect(c).NotTo(BeNil(), "pod %s was not injected", pod.Name)
	e := &enforcerProcess{pod: pod, ip: ip, dir: GinkgoT().TempDir()}
	var labels strings.Builder
	for k, v := range pod.Labels {
		fmt.Fprintf(&labels, "%s=%q\n", k, v)
	}
	Expect(os.WriteFile(filepath.Join(e.dir, "labels"), []byte(labels.String()), 0o644)).To(Succeed())
	e.mirrorConfig(ctx)
	e.mirrorToken(ctx)

	expand := strings.NewReplacer("$(POD_NAME)", pod.Name, "$(POD_NAMESPACE)", pod.Namespace, "0.0.0.0:", ip+":")
	var args []string
	for _, arg := range c.Args {
		switch {
		case strings.HasPrefix(arg, "--config="):
			arg = "--config=" + filepath.Join(e.dir, wellknown.ConfigKey)
		case strings.HasPrefix(arg, "--labels-file="):
			arg = "--labels-file=" + filepath.Join(e.dir, "labels")
		case strings.HasPrefix(arg, "--debug-listen=127.0.0.1:"):
			// Loopback of the pod: the pod's own IP here, so that two
			// enforcers do not share one port.
			arg = "--debug-listen=" + ip + strings.TrimPrefix(arg, "--debug-listen=127.0.0.1")
		case strings.HasPrefix(arg, "--status-token-file="):
			arg = "--status-token-file=" + e.tokenPath()
		}
		args = append(args, expand.Replace(arg))
	}
	args = append(args, "--shutdown-timeout=1s")
	env := []string{"PATH=" + os.Getenv("PATH"), "POD_NAME=" + pod.Name, "POD_NAMESPACE=" + pod.Namespace, "POD_UID=" + string(pod.UID)}
	for _, v := range c.Env {
		if v.ValueFrom == nil {
			env = append(env, v.Name+"="+v.Value)
		}
	}
	e.args, e.env = args, env
	e.run()
	DeferCleanup(e.stop)
	return e
}

func (e *enforcerProcess) run() {
	e.cmd = exec.Command(enforcerBin, e.args...)
	e.cmd.Env = e.env
	e.cmd.Stdout, e.cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(e.cmd.Start()).To(Succeed())
	done := make(chan struct{})
	e.done = done
	go func() {
		_ = e.cmd.Wait()
		close(done)
	}()
}

// restart stops the enforcer and starts a new one in its place, with
// counters from zero, as a rollout's new pod would.
func (e *enforcerProcess) restart() {
	e.stop()
	e.run()
}

// mirrorConfig writes the namespace's ConfigMap to the enforcer's config
// file as the kubelet would: a new file renamed over the old one.
func (e *enforcerProcess) mirrorConfig(ctx context.Context) {
	cm := &corev1.ConfigMap{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.pod.Namespace, Name: wellknown.ConfigMapName}, cm)).To(Succeed())
	tmp := filepath.Join(e.dir, ".config.json.tmp")
	Expect(os.WriteFile(tmp, []byte(cm.Data[wellknown.ConfigKey]), 0o644)).To(Succeed())
	Expect(os.Rename(tmp, filepath.Join(e.dir, wellknown.ConfigKey))).To(Succeed())
}

// mirrorToken writes the namespace's admin Secret token to the enforcer's
// token file, as the kubelet would the Secret volume.
func (e *enforcerProcess) mirrorToken(ctx context.Context) {
	secret := &corev1.Secret{}
	Eventually(func() error {
		return k8sClient.Get(ctx, client.ObjectKey{Namespace: e.pod.Namespace, Name: wellknown.AdminSecretName}, secret)
	}).Should(Succeed(), "the policy controller writes the admin Secret")
	e.writeToken(string(secret.Data[wellknown.AdminTokenKey]))
}

// writeToken replaces the enforcer's token file.
func (e *enforcerProcess) writeToken(token string) {
	tmp := e.tokenPath() + ".tmp"
	Expect(os.WriteFile(tmp, []byte(token), 0o600)).To(Succeed())
	Expect(os.Rename(tmp, e.tokenPath())).To(Succeed())
}

func (e *enforcerProcess) tokenPath() string { return filepath.Join(e.dir, wellknown.AdminTokenKey) }

// stop ends the process: SIGTERM, then SIGKILL after a few seconds.
func (e *enforcerProcess) stop() {
	select {
	case <-e.done:
		return
	default:
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(5 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.done
	}
}

// kubectl runs the real kubectl as an admin and returns its output.
func kubectl(args ...string) string {
	bin, err := envtestutil.Kubectl(testEnv.BinaryAssetsDirectory)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "kubectl %v: %s", args, out)
	return string(out)
}
