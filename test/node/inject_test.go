//go:build node

package node

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/stack"
)

const injectPolicy = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: api}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules: [{name: all, algorithm: FixedWindow, limits: [{requests: 5, period: 1h}]}]
`

// The manager runs on the machine (as in make demo), its webhook called by
// the API server; Redis and the application run as pods from the images
// of make node-images, and the kubelet runs the injected enforcer.
var _ = Describe("An injected pod on the real kubelet", Ordered, func() {
	const ns = "shop"
	labels := map[string]string{"app": "api"}
	var pod corev1.Pod

	BeforeAll(func(ctx SpecContext) {
		for _, archive := range []string{"sluice-enforcer.tar", "sluice-echo.tar", "sluice-redis.tar"} {
			if cluster.Images[archive] == "" {
				Skip("bin/images/" + archive + " is missing: make node-images")
			}
		}
		redisIP := startRedis(ctx, "sluice-system")
		startManager(ctx, "redis://"+redisIP+":6379")

		createNamespace(ctx, ns, map[string]string{"sluice.dev/injection": "enabled"})
		policies, err := stack.ParsePolicies([]byte(injectPolicy))
		Expect(err).NotTo(HaveOccurred())
		for _, p := range policies {
			p.Namespace = ns
			Expect(cluster.Client.Create(ctx, p)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionAccepted)).To(BeTrue())
			}).Should(Succeed(), "policy %s is accepted", p.Name)
		}
		app := appDeployment(ns, "api", labels, cluster.Images["sluice-echo.tar"], []string{"--listen=:8080"}, 8080)
		// The default grace period, to see how long an injected pod takes
		// to end.
		app.Spec.Template.Spec.TerminationGracePeriodSeconds = nil
		Expect(cluster.Client.Create(ctx, app)).To(Succeed())
	})

	It("gets the enforcer as a native sidecar and turns Ready", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			var list corev1.PodList
			g.Expect(cluster.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(1))
			pod = list.Items[0]
			g.Expect(pod.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
		}).WithTimeout(2 * time.Minute).Should(Succeed())
		Expect(pod.Spec.InitContainers).To(ContainElement(And(
			HaveField("Name", "sluice-enforcer"),
			HaveField("RestartPolicy", HaveValue(Equal(corev1.ContainerRestartPolicyAlways))),
		)))
		Expect(pod.Status.InitContainerStatuses).To(ContainElement(And(
			HaveField("Name", "sluice-enforcer"),
			HaveField("Ready", true),
			HaveField("Started", ptr.To(true)),
			HaveField("RestartCount", BeZero()),
		)))
	})

	It("runs the enforcer as uid 65532, without capabilities or new privileges, on a read-only root", func() {
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

	It("limits traffic on the pod's sluice-http port: 5 answers, then 429", func() {
		url := fmt.Sprintf("http://%s:15080/", pod.Status.PodIP)
		var codes []int
		var limit string
		for range 7 {
			req, err := http.NewRequest(http.MethodGet, url, nil)
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("X-Tenant-ID", "acme")
			resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
			Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			codes = append(codes, resp.StatusCode)
			limit = resp.Header.Get("X-RateLimit-Limit")
		}
		Expect(codes).To(Equal([]int{200, 200, 200, 200, 200, 429, 429}))
		Expect(limit).To(Equal("5"))
	})

	It("is reached through a Service whose targetPort is the sidecar's sluice-http", func(ctx SpecContext) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"},
			Spec: corev1.ServiceSpec{
				Selector: labels,
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("sluice-http")}},
			},
		}
		Expect(cluster.Client.Create(ctx, svc)).To(Succeed())
		Eventually(func(g Gomega) {
			req, err := http.NewRequest(http.MethodGet, "http://"+svc.Spec.ClusterIP+"/", nil)
			g.Expect(err).NotTo(HaveOccurred())
			req.Header.Set("X-Tenant-ID", "through-the-service")
			resp, err := (&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
			g.Expect(resp.Header.Get("X-RateLimit-Limit")).NotTo(BeEmpty(), "the answer came through the enforcer")
		}).Should(Succeed())
	})

	It("follows a policy edit through the real kubelet's ConfigMap volume update", func(ctx SpecContext) {
		var p v1alpha1.RateLimitPolicy
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "api"}, &p)).To(Succeed())
		patch := client.MergeFrom(p.DeepCopy())
		p.Spec.Rules[0].Limits[0].Requests = 8
		Expect(cluster.Client.Patch(ctx, &p, patch)).To(Succeed())
		start := time.Now()
		url := fmt.Sprintf("http://%s:15080/", pod.Status.PodIP)
		Eventually(func(g Gomega) {
			req, err := http.NewRequest(http.MethodGet, url, nil)
			g.Expect(err).NotTo(HaveOccurred())
			req.Header.Set("X-Tenant-ID", "edit-"+strconv.FormatInt(time.Now().UnixNano(), 10))
			resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			g.Expect(resp.Header.Get("X-RateLimit-Limit")).To(Equal("8"))
		}).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("policy edit to enforcer", time.Since(start).Round(100*time.Millisecond).String())
		GinkgoWriter.Printf("the edit reached the enforcer in %s\n", time.Since(start).Round(100*time.Millisecond))
	})

	It("reports the enforcer in the policy's status: Ready", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			var p v1alpha1.RateLimitPolicy
			g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "api"}, &p)).To(Succeed())
			cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "%s: %s", cond.Reason, cond.Message)
		}).Should(Succeed())
	})

	It("has the kubelet restart an enforcer killed with SIGKILL, the application untouched", func(ctx SpecContext) {
		pid := containerPid(string(pod.UID), "sluice-enforcer")
		Expect(pid).NotTo(BeZero(), "the enforcer's process is in the pod's cgroup")
		appBefore := appStartedAt(ctx, ns, pod.Name)
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
		Expect(appStartedAt(ctx, ns, pod.Name)).To(Equal(appBefore), "the application container was not restarted")
		Expect(containerPid(string(pod.UID), "sluice-enforcer")).NotTo(Equal(pid))
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(fmt.Sprintf("http://%s:15080/", pod.Status.PodIP))
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
	})

	It("ends a deleted pod well within its grace period, and its replacement is injected", func(ctx SpecContext) {
		var old corev1.Pod
		Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(&pod), &old)).To(Succeed())
		start := time.Now()
		Expect(cluster.Client.Delete(ctx, &old)).To(Succeed())
		Eventually(func() bool {
			err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(&old), &corev1.Pod{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(time.Minute).Should(BeTrue())
		took := time.Since(start)
		AddReportEntry("deleted injected pod gone after", took.Round(100*time.Millisecond).String())
		GinkgoWriter.Printf("the deleted pod was gone after %s\n", took.Round(100*time.Millisecond))
		Expect(took).To(BeNumerically("<", 20*time.Second), "the containers end on SIGTERM, not at the 30 s grace period's SIGKILL")
		Eventually(func(g Gomega) {
			var list corev1.PodList
			g.Expect(cluster.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(1))
			g.Expect(list.Items[0].Name).NotTo(Equal(old.Name))
			g.Expect(list.Items[0].Spec.InitContainers).To(ContainElement(HaveField("Name", "sluice-enforcer")))
			g.Expect(podReady(&list.Items[0])).To(BeTrue())
		}).Should(Succeed())
	})
})

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

// startManager builds sluice-manager and runs it on the machine with the
// webhook where the API server calls it.
func startManager(ctx context.Context, redisURL string) {
	bin := filepath.Join(cluster.Dir, "sluice-manager")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/manager")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	probe := "127.0.0.1:" + strconv.Itoa(freePort())
	Expect(cluster.Run("sluice-manager", exec.Command(bin,
		"--kubeconfig="+cluster.Kubeconfig,
		"--health-probe-bind-address="+probe,
		"--metrics-bind-address=0",
		"--default-redis-url="+redisURL,
		"--enforcer-image="+cluster.Images["sluice-enforcer.tar"],
		"--enforcer-image-pull-policy=Never",
		"--status-interval=1s",
		"--webhook-cert-self-managed=false",
		"--webhook-cert-dir="+cluster.WebhookCertDir,
		"--webhook-port="+strconv.Itoa(cluster.WebhookPort),
	))).To(Succeed())
	Eventually(func() (int, error) {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}).Should(Equal(http.StatusOK), "sluice-manager is ready")
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
