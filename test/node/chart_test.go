//go:build node

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/stack"
)

const (
	// release and releaseNS are docs/install.md's.
	release   = "sluice"
	releaseNS = "sluice-system"
	// shopNS holds the two sample applications.
	shopNS = "shop"
)

// apiPolicy limits each tenant of the api application to 5 requests an
// hour, shared by its replicas.
const apiPolicy = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: api}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  responseHeaders: Both
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules: [{name: all, algorithm: FixedWindow, limits: [{requests: 5, period: 1h}]}]
`

// chartValues are what a user on this node passes helm: the images
// imported into the node's containerd (no registry, never pulled), and
// the Redis they run in namespace redis by its ClusterIP, since the node
// has no cluster DNS to resolve redis.redis.svc. The status is polled
// every 2 s instead of 10 s so the specs wait less.
func chartValues(tag, redisURL string) string {
	return fmt.Sprintf(`images:
  registry: localhost
  pullPolicy: Never
  manager: {tag: %[1]q}
  enforcer: {tag: %[1]q}
defaultRedis:
  url: %[2]q
enforcer:
  statusPolling: {interval: 2s}
manager:
  logEncoder: console
`, tag, redisURL)
}

// The chart installed with helm as a user would: the manager as a
// Deployment from its image with the webhook reached through its Service
// and its certificate issued by the manager itself; Redis and two sample
// applications as Deployments, their Services pointing at sluice-http.
var _ = Describe("Sluice installed with helm on the real node", Ordered, func() {
	labels := map[string]string{"app": "api"}
	var (
		pods    []corev1.Pod // the api application's, once Ready
		apiSvc  string       // its Service's ClusterIP
		tag     string
		manager = release + "-manager"
	)

	BeforeAll(func(ctx SpecContext) {
		for _, archive := range []string{"sluice-manager.tar", "sluice-enforcer.tar", "sluice-echo.tar", "sluice-orders.tar", "sluice-redis.tar"} {
			if cluster.Images[archive] == "" {
				Skip("bin/images/" + archive + " is missing: make node-images")
			}
		}
		_, tag, _ = strings.Cut(cluster.Images["sluice-manager.tar"], ":")
		redisIP := startRedis(ctx, "redis")
		values := filepath.Join(cluster.Dir, "sluice-values.yaml")
		Expect(os.WriteFile(values, []byte(chartValues(tag, "redis://"+redisIP+":6379")), 0o644)).To(Succeed())
		helm(ctx, "install", release, "charts/sluice", "-n", releaseNS, "--create-namespace", "-f", values)
		start := time.Now()
		kubectl(ctx, "-n", releaseNS, "rollout", "status", "deployment/"+manager, "--timeout=3m")
		AddReportEntry("helm install to manager rolled out", time.Since(start).Round(100*time.Millisecond).String())

		createNamespace(ctx, shopNS, map[string]string{"sluice.dev/injection": "enabled"})
		applyPolicies(ctx, shopNS, apiPolicy)
		grpcSample, err := os.ReadFile(filepath.Join(root, "config", "samples", "ratelimitpolicy_grpc.yaml"))
		Expect(err).NotTo(HaveOccurred())
		applyPolicies(ctx, shopNS, string(grpcSample))
		awaitInjection(ctx, shopNS, labels, cluster.Images["sluice-echo.tar"])

		api := appDeployment(shopNS, "api", labels, cluster.Images["sluice-echo.tar"], []string{"--listen=:8080"}, 8080)
		api.Spec.Replicas = new(int32(2))
		withReadiness(api, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("app")}}, PeriodSeconds: 1})
		ordersLabels := map[string]string{"app.kubernetes.io/name": "orders"}
		orders := appDeployment(shopNS, "orders", ordersLabels, cluster.Images["sluice-orders.tar"], []string{"--listen=:50051"}, 50051)
		withReadiness(orders, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 50051}}, PeriodSeconds: 1})
		for _, d := range []*appsv1.Deployment{api, orders} {
			// The default grace period, as users have it: the injected
			// preStop hook waits in it while the pod leaves the endpoints.
			d.Spec.Template.Spec.TerminationGracePeriodSeconds = nil
			Expect(cluster.Client.Create(ctx, d)).To(Succeed())
		}
		apiSvc = serviceFor(ctx, shopNS, "api", labels, 80)
		_ = serviceFor(ctx, shopNS, "orders", ordersLabels, 50051)
	})

	It("runs the manager from its image, its webhook certificate issued by the manager", func(ctx SpecContext) {
		var list corev1.PodList
		Expect(cluster.Client.List(ctx, &list, client.InNamespace(releaseNS), client.MatchingLabels{"app.kubernetes.io/component": "manager"})).To(Succeed())
		Expect(list.Items).To(HaveLen(2), "the chart's default two replicas")
		for _, p := range list.Items {
			Expect(p.Spec.Containers[0].Image).To(Equal("localhost/sluice-manager:" + tag))
			Expect(p.Spec.Containers[0].ImagePullPolicy).To(Equal(corev1.PullNever))
			Expect(podReady(&p)).To(BeTrue(), "pod %s is Ready", p.Name)
		}
		var secret corev1.Secret
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: release + "-webhook-server-cert"}, &secret)).To(Succeed())
		Expect(secret.Data).To(HaveKey("tls.crt"), "the manager filled the Secret the chart made empty")
		caBundle := kubectl(ctx, "get", "mutatingwebhookconfiguration", release+"-injector", "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}")
		Expect(caBundle).NotTo(BeEmpty())
		service := kubectl(ctx, "get", "mutatingwebhookconfiguration", release+"-injector", "-o", "jsonpath={.webhooks[0].clientConfig.service.name}")
		Expect(service).To(Equal(release + "-webhook-service"))
	})

	It("injects the enforcer as a native sidecar through the webhook's Service, and the pods turn Ready", func(ctx SpecContext) {
		pods = readyPods(ctx, shopNS, labels, 2)
		for _, pod := range pods {
			Expect(pod.Spec.InitContainers).To(ContainElement(And(
				HaveField("Name", "sluice-enforcer"),
				HaveField("Image", "localhost/sluice-enforcer:"+tag),
				HaveField("RestartPolicy", HaveValue(Equal(corev1.ContainerRestartPolicyAlways))),
			)))
			Expect(pod.Status.InitContainerStatuses).To(ContainElement(And(
				HaveField("Name", "sluice-enforcer"),
				HaveField("Ready", true),
				HaveField("RestartCount", BeZero()),
			)))
		}
		readyPods(ctx, shopNS, map[string]string{"app.kubernetes.io/name": "orders"}, 1)
	})

	injectedPodSpecs(func() corev1.Pod { return pods[0] })

	It("answers through the Service 5 times, then 429 with exact headers", func(ctx SpecContext) {
		waitRoutes("http://" + apiSvc + "/")
		var codes, remaining []string
		var last *http.Response
		var lastBody []byte
		for range 7 {
			resp, body := through("http://"+apiSvc+"/", "alice")
			codes = append(codes, strconv.Itoa(resp.StatusCode))
			remaining = append(remaining, resp.Header.Get("X-RateLimit-Remaining"))
			Expect(resp.Header.Get("X-RateLimit-Limit")).To(Equal("5"))
			Expect(resp.Header.Get("RateLimit-Policy")).To(Equal(`"api/all";q=5;w=3600`))
			last, lastBody = resp, body
		}
		Expect(codes).To(Equal([]string{"200", "200", "200", "200", "200", "429", "429"}))
		Expect(remaining).To(Equal([]string{"4", "3", "2", "1", "0", "0", "0"}))

		Expect(last.Header.Get("Content-Type")).To(Equal("application/problem+json"))
		m := regexp.MustCompile(`^"api/all";r=0;t=(\d+)$`).FindStringSubmatch(last.Header.Get("RateLimit"))
		Expect(m).NotTo(BeNil(), "RateLimit: %q", last.Header.Get("RateLimit"))
		t, _ := strconv.Atoi(m[1])
		Expect(t).To(BeNumerically(">", 0))
		Expect(t).To(BeNumerically("<=", 3600))
		Expect(last.Header.Get("Retry-After")).To(Equal(m[1]), "Retry-After is the window's reset")
		reset, err := strconv.ParseInt(last.Header.Get("X-RateLimit-Reset"), 10, 64)
		Expect(err).NotTo(HaveOccurred())
		Expect(reset).To(BeNumerically("~", time.Now().Unix()+int64(t), 2), "X-RateLimit-Reset is Unix seconds")
		var problem map[string]any
		Expect(json.Unmarshal(lastBody, &problem)).To(Succeed())
		Expect(problem).To(HaveKeyWithValue("status", BeNumerically("==", 429)))
		Expect(problem).To(HaveKeyWithValue("policy", "api"))
		Expect(problem).To(HaveKeyWithValue("rule", "all"))
	})

	It("shares one limit between the replicas: each pod refuses the tenant the Service exhausted", func() {
		for _, pod := range pods {
			resp, _ := through(fmt.Sprintf("http://%s:15080/", pod.Status.PodIP), "alice")
			Expect(resp.StatusCode).To(Equal(http.StatusTooManyRequests), "pod %s", pod.Name)
		}
		// And a tenant spread over both pods gets 5 in all.
		allowed, servedBy := 0, map[string]bool{}
		for i := range 10 {
			resp, body := through(fmt.Sprintf("http://%s:15080/", pods[i%2].Status.PodIP), "bob")
			if resp.StatusCode == http.StatusOK {
				allowed++
				var e struct{ Pod string }
				Expect(json.Unmarshal(body, &e)).To(Succeed())
				servedBy[e.Pod] = true
			}
		}
		Expect(allowed).To(Equal(5))
		Expect(servedBy).To(HaveLen(2))
	})

	It("limits gRPC calls through the orders Service: 10 Create calls, then RESOURCE_EXHAUSTED", func(ctx SpecContext) {
		var svc corev1.Service
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: shopNS, Name: "orders"}, &svc)).To(Succeed())
		Expect(grpcCreates(ctx, svc.Spec.ClusterIP+":50051", "acme", 12)).To(Equal(
			[]string{"OK", "OK", "OK", "OK", "OK", "OK", "OK", "OK", "OK", "OK", "ResourceExhausted", "ResourceExhausted"}))
	})

	It("follows a policy edit pushed to the enforcers: kubectl get rlp is Ready for the new generation", func(ctx SpecContext) {
		var p v1alpha1.RateLimitPolicy
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: shopNS, Name: "api"}, &p)).To(Succeed())
		patch := client.MergeFrom(p.DeepCopy())
		p.Spec.Rules[0].Limits[0].Requests = 8
		Expect(cluster.Client.Patch(ctx, &p, patch)).To(Succeed())
		start := time.Now()
		var seen []string
		Eventually(func(g Gomega) {
			out, err := tryRun(ctx, "kubectl", "get", "rlp", "api", "-n", shopNS, "--no-headers", "-o",
				`custom-columns=READY:.status.conditions[?(@.type=="Ready")].status,REASON:.status.conditions[?(@.type=="Ready")].reason,GEN:.status.observedGeneration`)
			g.Expect(err).NotTo(HaveOccurred())
			row := strings.Join(strings.Fields(out), " ")
			if len(seen) == 0 || seen[len(seen)-1] != row {
				seen = append(seen, row)
			}
			// Pushed, the edit may be Ready before kubectl has seen it Stale.
			g.Expect(row).To(Equal("True EnforcersReady " + strconv.FormatInt(p.Generation, 10)))
		}).WithTimeout(2 * time.Minute).Should(Succeed())
		AddReportEntry("policy edit to Ready", time.Since(start).Round(100*time.Millisecond).String())
		GinkgoWriter.Printf("kubectl get rlp went %q in %s\n", seen, time.Since(start).Round(100*time.Millisecond))
		for _, pod := range pods {
			resp, _ := through(fmt.Sprintf("http://%s:15080/", pod.Status.PodIP), "carol-"+pod.Name)
			Expect(resp.Header.Get("X-RateLimit-Limit")).To(Equal("8"), "pod %s", pod.Name)
		}
	})

	policyLifecycleSpecs()

	deliverySpecs(manager)

	It("has the kubelet restart an enforcer killed with SIGKILL, the application untouched", func(ctx SpecContext) {
		killEnforcer(ctx, pods[0])
	})

	It("takes new values with helm upgrade: the manager rolls and injects the new enforcer resources", func(ctx SpecContext) {
		helm(ctx, "upgrade", release, "charts/sluice", "-n", releaseNS, "--reuse-values",
			"--set", "enforcer.resources.limits.memory=96Mi", "--wait", "--timeout=3m")
		kubectl(ctx, "-n", releaseNS, "rollout", "status", "deployment/"+manager, "--timeout=3m")
		var d appsv1.Deployment
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: manager}, &d)).To(Succeed())
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--enforcer-memory-limit=96Mi"))
		Expect(kubectl(ctx, "-n", releaseNS, "get", "deployment", manager, "-o", "jsonpath={.status.updatedReplicas}/{.status.readyReplicas}")).To(Equal("2/2"))
		// Replaced replicas serve for manager.preStopSeconds more, with the
		// values before the upgrade: pods are restarted once they are gone,
		// as docs/upgrading.md says.
		Eventually(func(g Gomega) {
			var list corev1.PodList
			g.Expect(cluster.Client.List(ctx, &list, client.InNamespace(releaseNS),
				client.MatchingLabels{"app.kubernetes.io/instance": release, "app.kubernetes.io/component": "manager"})).To(Succeed())
			g.Expect(list.Items).To(HaveLen(2))
			for _, p := range list.Items {
				g.Expect(p.DeletionTimestamp).To(BeNil(), "manager pod %s is still stopping", p.Name)
			}
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	})

	It("rolls the application out again under steady traffic without failing a request", func(ctx SpecContext) {
		load := startSteadyTraffic("http://" + apiSvc + "/")
		time.Sleep(2 * time.Second)
		start := time.Now()
		kubectl(ctx, "-n", shopNS, "rollout", "restart", "deployment/api")
		kubectl(ctx, "-n", shopNS, "rollout", "status", "deployment/api", "--timeout=3m")
		took := time.Since(start)
		// Traffic goes on until the old pods are gone, their drain included.
		newPods := readyPods(ctx, shopNS, labels, 2)
		gone := time.Since(start)
		time.Sleep(time.Second)
		sent, failures := load.stop()
		AddReportEntry("rollout restart of api", took.Round(100*time.Millisecond).String())
		AddReportEntry("old pods gone after", gone.Round(100*time.Millisecond).String())
		AddReportEntry("steady traffic", fmt.Sprintf("%d requests, %d failed", sent, len(failures)))
		Expect(sent).To(BeNumerically(">", 50), "traffic kept flowing")
		Expect(failures).To(BeEmpty(), "no request failed while the pods were replaced")
		Expect(gone).To(BeNumerically("<", 60*time.Second), "old pods end after the drain, not at the grace period's SIGKILL")
		for _, pod := range newPods {
			Expect(slices.ContainsFunc(pods, func(old corev1.Pod) bool { return old.UID == pod.UID })).To(BeFalse(), "pod %s is new", pod.Name)
			pid := containerPid(string(pod.UID), "sluice-enforcer")
			Expect(pid).NotTo(BeZero())
			Expect(memoryLimit(pid)).To(BeEquivalentTo(96<<20), "the kubelet gave the enforcer of %s the upgraded memory limit", pod.Name)
		}
		pods = newPods
	})

	It("leaves only the policies and the CRD after helm uninstall, and the injected pods keep enforcing", func(ctx SpecContext) {
		helm(ctx, "uninstall", release, "-n", releaseNS, "--wait", "--timeout=2m")
		// The manager's pods end after their grace period; the rest goes at once.
		Eventually(func(g Gomega) {
			left, err := tryRun(ctx, "kubectl", "get", "all,secrets,configmaps,serviceaccounts,roles,rolebindings,poddisruptionbudgets,leases",
				"-n", releaseNS, "-l", "app.kubernetes.io/instance="+release, "-o", "name")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.TrimSpace(left)).To(BeEmpty(), "nothing of the release is left in %s", releaseNS)
		}).Should(Succeed())
		// Whatever the labels: what every namespace has, and the leader
		// election Lease, which the manager makes and upgrading.md names.
		all := kubectl(ctx, "get", "all,secrets,configmaps,serviceaccounts,roles,rolebindings,poddisruptionbudgets,leases,networkpolicies",
			"-n", releaseNS, "-o", "name")
		Expect(strings.Fields(all)).To(ConsistOf("configmap/kube-root-ca.crt", "serviceaccount/default",
			"lease.coordination.k8s.io/sluice-manager.sluice.dev"))
		clusterScoped := kubectl(ctx, "get", "mutatingwebhookconfigurations,clusterroles,clusterrolebindings,crds",
			"-l", "app.kubernetes.io/instance="+release, "-o", "name")
		Expect(strings.Fields(clusterScoped)).To(ConsistOf("customresourcedefinition.apiextensions.k8s.io/ratelimitpolicies.sluice.dev"))
		Expect(strings.Fields(kubectl(ctx, "get", "rlp", "-n", shopNS, "-o", "name"))).To(ConsistOf(
			"ratelimitpolicy.sluice.dev/api", "ratelimitpolicy.sluice.dev/orders"))
		resp, _ := through("http://"+apiSvc+"/", "dave")
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		Expect(resp.Header.Get("X-RateLimit-Limit")).To(Equal("8"), "the enforcers keep their configuration without the manager")
	})
})

// applyPolicies creates the policies of doc in ns and waits until each is
// Accepted.
func applyPolicies(ctx context.Context, ns, doc string) {
	policies, err := stack.ParsePolicies([]byte(doc))
	Expect(err).NotTo(HaveOccurred())
	for _, p := range policies {
		p.Namespace = ns
		Expect(cluster.Client.Create(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionAccepted)).To(BeTrue())
		}).Should(Succeed(), "policy %s is accepted", p.Name)
	}
}

func withReadiness(d *appsv1.Deployment, probe *corev1.Probe) {
	d.Spec.Template.Spec.Containers[0].ReadinessProbe = probe
}

// serviceFor makes the application's Service, its targetPort the
// enforcer's sluice-http, and returns its ClusterIP.
func serviceFor(ctx context.Context, ns, name string, selector map[string]string, port int32) string {
	svc := &corev1.Service{}
	svc.Namespace, svc.Name = ns, name
	svc.Spec.Selector = selector
	svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromString("sluice-http")}}
	Expect(cluster.Client.Create(ctx, svc)).To(Succeed())
	return svc.Spec.ClusterIP
}

// readyPods waits until the pods of labels are n, all Ready and none
// terminating, and returns them.
func readyPods(ctx context.Context, ns string, labels map[string]string, n int) []corev1.Pod {
	var pods []corev1.Pod
	EventuallyWithOffset(1, func(g Gomega) {
		var list corev1.PodList
		g.Expect(cluster.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(n))
		for _, p := range list.Items {
			g.Expect(p.DeletionTimestamp).To(BeNil())
			g.Expect(podReady(&p)).To(BeTrue(), "pod %s is Ready", p.Name)
		}
		pods = list.Items
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	return pods
}

// waitRoutes waits until kube-proxy routes url's Service to a pod: a new
// Service or pod takes a moment to reach its rules. Each try is a tenant
// of its own, so none counts against another's limit.
func waitRoutes(url string) {
	n := 0
	EventuallyWithOffset(1, func() error {
		n++
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Tenant-ID", fmt.Sprintf("wait-%d", n))
		resp, err := (&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}).Should(Succeed())
}

// through sends GET url as tenant on a connection of its own (kube-proxy
// picks a backend per connection) and returns the answer and its body.
func through(url, tenant string) (*http.Response, []byte) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	req.Header.Set("X-Tenant-ID", tenant)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return resp, body
}

// memoryLimit is the memory cgroup limit of pid, in bytes (cgroup v1).
func memoryLimit(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "memory") {
			limit, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"))
			ExpectWithOffset(1, err).NotTo(HaveOccurred())
			n, err := strconv.ParseInt(strings.TrimSpace(string(limit)), 10, 64)
			ExpectWithOffset(1, err).NotTo(HaveOccurred())
			return n
		}
	}
	Fail(fmt.Sprintf("process %d has no memory cgroup: %s", pid, data))
	return 0
}

// steadyTraffic sends requests one after another from two clients: one
// on a new connection each time, one keeping its connection alive as a
// service calling another does. Each request is a tenant of its own, so
// none is refused by the limit.
type steadyTraffic struct {
	stopped  atomic.Bool
	wg       sync.WaitGroup
	sent     atomic.Int64
	mu       sync.Mutex
	failures []string
}

func startSteadyTraffic(url string) *steadyTraffic {
	s := &steadyTraffic{}
	for i, keepAlive := range []bool{false, true} {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: !keepAlive}}
		s.wg.Go(func() {
			defer GinkgoRecover()
			for n := 0; !s.stopped.Load(); n++ {
				s.one(c, url, fmt.Sprintf("steady-%d-%d", i, n), keepAlive)
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	return s
}

func (s *steadyTraffic) one(c *http.Client, url, tenant string, keepAlive bool) {
	s.sent.Add(1)
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-Tenant-ID", tenant)
	at := time.Now().Format("15:04:05.000")
	resp, err := c.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s (%s)", resp.Status, resp.Header.Get("X-Sluice-Error"))
		}
	}
	if err != nil {
		s.mu.Lock()
		s.failures = append(s.failures, fmt.Sprintf("%s keep-alive=%v: %v", at, keepAlive, err))
		s.mu.Unlock()
	}
}

func (s *steadyTraffic) stop() (int64, []string) {
	s.stopped.Store(true)
	s.wg.Wait()
	return s.sent.Load(), s.failures
}

// awaitInjection waits until the API server reaches the injection webhook:
// a server-side dry run of a pod with labels in ns comes back with the
// enforcer. With failurePolicy Ignore, a pod created before then would
// start without it (install.md).
func awaitInjection(ctx context.Context, ns string, labels map[string]string, image string) {
	Eventually(func(g Gomega) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "injection-check-", Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
		}
		g.Expect(cluster.Client.Create(ctx, pod, client.DryRunAll)).To(Succeed())
		g.Expect(pod.Spec.InitContainers).To(ContainElement(HaveField("Name", "sluice-enforcer")))
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "the webhook injects pods of namespace %s", ns)
}
