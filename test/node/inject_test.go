//go:build node

package node

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// injectedPodSpecs are what a user can check of one injected pod on the
// real kubelet: who its enforcer runs as, on which filesystem, with which
// credentials.
func injectedPodSpecs(injected func() corev1.Pod) {
	It("runs the enforcer as uid 65532, without capabilities or new privileges, on a read-only root", func() {
		pod := injected()
		pid := containerPid(string(pod.UID), "sluice-enforcer")
		Expect(pid).NotTo(BeZero(), "the enforcer's process is in the pod's cgroup")
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		Expect(err).NotTo(HaveOccurred())
		fields := map[string]string{}
		for line := range strings.SplitSeq(string(status), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				fields[k] = strings.Join(strings.Fields(v), " ")
			}
		}
		Expect(fields["Uid"]).To(Equal("65532 65532 65532 65532"))
		Expect(fields["Gid"]).To(Equal("65532 65532 65532 65532"))
		Expect(fields["CapEff"]).To(Equal("0000000000000000"))
		Expect(fields["NoNewPrivs"]).To(Equal("1"))
		Expect(fields["Seccomp"]).To(Equal("2"), "the RuntimeDefault seccomp profile filters its system calls")
		mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
		Expect(err).NotTo(HaveOccurred())
		var rootOptions string
		for line := range strings.SplitSeq(string(mounts), "\n") {
			if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
				rootOptions = f[5]
			}
		}
		Expect(strings.Split(rootOptions, ",")).To(ContainElement("ro"), "the root filesystem is mounted read-only")
	})

	It("gives the enforcer no Kubernetes API token, and the application its own", func() {
		pod := injected()
		token := "/var/run/secrets/kubernetes.io/serviceaccount/token"
		enforcer := containerPid(string(pod.UID), "sluice-enforcer")
		Expect(enforcer).NotTo(BeZero())
		_, err := os.Stat(fmt.Sprintf("/proc/%d/root%s", enforcer, token))
		Expect(os.IsNotExist(err)).To(BeTrue(), "the enforcer never calls the API: no token in its filesystem (%v)", err)
		for _, c := range pod.Spec.Containers {
			hasToken := false
			for _, m := range c.VolumeMounts {
				hasToken = hasToken || m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount"
			}
			Expect(hasToken).To(BeTrue(), "container %s keeps its service account token", c.Name)
		}
	})
}

// killEnforcer kills pod's enforcer with SIGKILL and checks that the
// kubelet restarts it while the application runs on, and that the pod
// serves again.
func killEnforcer(ctx context.Context, pod corev1.Pod) {
	pid := containerPid(string(pod.UID), "sluice-enforcer")
	Expect(pid).NotTo(BeZero(), "the enforcer's process is in the pod's cgroup")
	appBefore := appStartedAt(ctx, pod.Namespace, pod.Name)
	Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
	sawNotReady := false
	Eventually(func(g Gomega) {
		var p corev1.Pod
		g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(&pod), &p)).To(Succeed())
		if !podReady(&p) {
			sawNotReady = true
		}
		g.Expect(p.Status.InitContainerStatuses).To(ContainElement(And(
			HaveField("Name", "sluice-enforcer"),
			HaveField("RestartCount", BeEquivalentTo(1)),
			HaveField("Ready", true),
		)))
		g.Expect(podReady(&p)).To(BeTrue())
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	GinkgoWriter.Printf("the pod went not Ready while its enforcer restarted: %v\n", sawNotReady)
	Expect(appStartedAt(ctx, pod.Namespace, pod.Name)).To(Equal(appBefore), "the application container was not restarted")
	Expect(containerPid(string(pod.UID), "sluice-enforcer")).NotTo(Equal(pid))
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(fmt.Sprintf("http://%s:15080/", pod.Status.PodIP))
	Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func appStartedAt(ctx context.Context, ns, name string) metav1.Time {
	var p corev1.Pod
	Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
	Expect(p.Status.ContainerStatuses).To(HaveLen(1))
	Expect(p.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())
	return p.Status.ContainerStatuses[0].State.Running.StartedAt
}

// containerPid finds the process named comm in the pod's cgroup (cgroupfs
// driver: .../kubepods/<qos>/pod<uid>/<container>), 0 if there is none.
func containerPid(podUID, comm string) int {
	entries, err := os.ReadDir("/proc")
	Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		name, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		cgroup, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if strings.TrimSpace(string(name)) == comm && strings.Contains(string(cgroup), "pod"+podUID) {
			return pid
		}
	}
	return 0
}

func createNamespace(ctx context.Context, name string, labels map[string]string) {
	Expect(cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})).To(Succeed())
	// ServiceAccount admission refuses pods until kube-controller-manager
	// has made the namespace's default account.
	Eventually(func(g Gomega) {
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: "default"}, &corev1.ServiceAccount{})).To(Succeed())
	}).Should(Succeed())
}

// startRedis runs Redis from make node-images' image behind a Service and
// returns its ClusterIP (the cluster has no DNS).
func startRedis(ctx context.Context, ns string) string {
	createNamespace(ctx, ns, nil)
	labels := map[string]string{"app": "redis"}
	Expect(cluster.Client.Create(ctx, appDeployment(ns, "redis", labels, cluster.Images["sluice-redis.tar"], nil, 6379))).To(Succeed())
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis"},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "redis", Port: 6379, TargetPort: intstr.FromString("app")}},
		},
	}
	Expect(cluster.Client.Create(ctx, svc)).To(Succeed())
	Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "redis"}, &d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
	}).Should(Succeed())
	return svc.Spec.ClusterIP
}

func appDeployment(ns, name string, labels map[string]string, image string, args []string, port int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name:            name,
						Image:           image,
						ImagePullPolicy: corev1.PullNever,
						Args:            args,
						Ports:           []corev1.ContainerPort{{Name: "app", ContainerPort: port}},
					}},
				},
			},
		},
	}
}
