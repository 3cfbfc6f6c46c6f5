//go:build node

package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/stack"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// webNS holds the application whose policies the lifecycle specs change.
const webNS = "web"

// webPolicies limit the web application's /a and /b paths, each to 2
// requests an hour per tenant, in two policies.
const webPolicies = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: web-a}
spec:
  selector: {matchLabels: {app: web}}
  upstreamPort: 8080
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules: [{name: a, match: {paths: [{prefix: /a}]}, algorithm: FixedWindow, limits: [{requests: 2, period: 1h}]}]
---
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: web-b}
spec:
  selector: {matchLabels: {app: web}}
  upstreamPort: 8080
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules: [{name: b, match: {paths: [{prefix: /b}]}, algorithm: FixedWindow, limits: [{requests: 2, period: 1h}]}]
`

// policyLifecycleSpecs change and delete policies on the real node, with
// the chart installed: what kubectl says and what the pods do must agree.
func policyLifecycleSpecs() {
	labels := map[string]string{"app": "web"}
	var pods []corev1.Pod

	It("refuses an upstreamPort that is one of the enforcer's own ports", func(ctx SpecContext) {
		createNamespace(ctx, webNS, map[string]string{"sluice.dev/injection": "enabled"})
		policies, err := stack.ParsePolicies([]byte(webPolicies))
		Expect(err).NotTo(HaveOccurred())
		loop := policies[0].DeepCopy()
		loop.Namespace, loop.Name, loop.Spec.UpstreamPort = webNS, "loop", 15080
		err = cluster.Client.Create(ctx, loop)
		Expect(err).To(MatchError(ContainSubstring("upstreamPort 15080 is the enforcer proxy port (sluice-http), so it would forward every request to itself")))
	})

	It("reports a changed upstreamPort as RestartRequired until the pods run with it", func(ctx SpecContext) {
		applyPolicies(ctx, webNS, webPolicies)
		web := appDeployment(webNS, "web", labels, cluster.Images["sluice-echo.tar"], []string{"--listen=:8080"}, 8080)
		web.Spec.Replicas = new(int32(2))
		Expect(cluster.Client.Create(ctx, web)).To(Succeed())
		pods = readyPods(ctx, webNS, labels, 2)
		waitReady(ctx, "web-a", v1alpha1.ReasonEnforcersReady)

		setUpstreamPort(ctx, "web-a", 8081)
		setUpstreamPort(ctx, "web-b", 8081)
		cond := waitReady(ctx, "web-a", v1alpha1.ReasonRestartRequired)
		Expect(cond.Message).To(ContainSubstring("forward to port 8080, not to spec.upstreamPort 8081"))
		Expect(cond.Message).To(ContainSubstring("restart deployment/web"))
		for _, pod := range pods {
			Expect(cond.Message).To(ContainSubstring(pod.Name))
			code, _ := toPod(pod, "/", "restart-"+pod.Name)
			Expect(code).To(Equal(http.StatusOK), "pod %s still forwards to the port it started with", pod.Name)
		}

		By("moving the application to the new port, which recreates the pods")
		var d appsv1.Deployment
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: webNS, Name: "web"}, &d)).To(Succeed())
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Template.Spec.Containers[0].Args = []string{"--listen=:8081"}
		d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort = 8081
		Expect(cluster.Client.Patch(ctx, &d, patch)).To(Succeed())
		kubectl(ctx, "-n", webNS, "rollout", "status", "deployment/web", "--timeout=3m")
		pods = readyPods(ctx, webNS, labels, 2)
		waitReady(ctx, "web-a", v1alpha1.ReasonEnforcersReady)
		waitReady(ctx, "web-b", v1alpha1.ReasonEnforcersReady)
	})

	It("stops enforcing a deleted policy on every pod, and passes traffic through once the last one goes", func(ctx SpecContext) {
		Expect(codes(pods[0], "/a", "erin", 3)).To(Equal([]int{200, 200, 429}))
		Expect(codes(pods[0], "/b", "erin", 3)).To(Equal([]int{200, 200, 429}))
		for _, pod := range pods {
			Expect(codes(pod, "/a", "erin", 1)).To(Equal([]int{429}), "pod %s shares the limit", pod.Name)
		}

		By("deleting web-a: /a is unlimited on every pod, /b still limited")
		start := time.Now()
		kubectl(ctx, "-n", webNS, "delete", "rlp", "web-a")
		for _, pod := range pods {
			Eventually(func() []int { return codes(pod, "/a", "erin", 1) }).WithTimeout(2*time.Minute).
				Should(Equal([]int{200}), "pod %s stops enforcing web-a", pod.Name)
			Expect(codes(pod, "/b", "erin", 1)).To(Equal([]int{429}), "pod %s still enforces web-b", pod.Name)
		}
		AddReportEntry("policy deletion to unlimited on every pod", time.Since(start).Round(100*time.Millisecond).String())

		By("deleting web-b, the namespace's last policy")
		kubectl(ctx, "-n", webNS, "delete", "rlp", "web-b")
		for _, pod := range pods {
			Eventually(func() []int { return codes(pod, "/b", "erin", 1) }).WithTimeout(2*time.Minute).
				Should(Equal([]int{200}), "pod %s passes traffic through", pod.Name)
			_, header := toPod(pod, "/b", "erin")
			Expect(header.Get("X-RateLimit-Limit")).To(BeEmpty(), "no limit applies on pod %s", pod.Name)
			Expect(adminMetrics(pod)).To(ContainSubstring("sluice_enforcer_config_policies 0"))
		}
		var cm corev1.ConfigMap
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: webNS, Name: "sluice-enforcer-config"}, &cm)).To(Succeed(),
			"the ConfigMap stays while injected pods read it")
		Expect(cm.Data["config.json"]).To(ContainSubstring(`"policies":[]`))
		var secret corev1.Secret
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: webNS, Name: wellknown.AdminSecretName}, &secret)).To(Succeed(),
			"the enforcers' credential stays while they run")
		for _, pod := range pods {
			Consistently(func(g Gomega) {
				g.Expect(adminStatus(pod, string(secret.Data[wellknown.AdminTokenKey]))).To(MatchRegexp(`"state": *"PassThrough"`),
					"pod %s can still be asked what it does", pod.Name)
			}).WithTimeout(5 * time.Second).Should(Succeed())
		}

		By("deleting the injected pods' Deployment")
		kubectl(ctx, "-n", webNS, "delete", "deployment", "web", "--wait=true")
		Eventually(func() bool {
			err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: webNS, Name: "sluice-enforcer-config"}, &corev1.ConfigMap{})
			return client.IgnoreNotFound(err) == nil && err != nil
		}).WithTimeout(2*time.Minute).Should(BeTrue(), "the ConfigMap goes with the last injected pod")
	})
}

// setUpstreamPort patches the upstreamPort of policy name in webNS.
func setUpstreamPort(ctx context.Context, name string, port int32) {
	var p v1alpha1.RateLimitPolicy
	Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: webNS, Name: name}, &p)).To(Succeed())
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.UpstreamPort = port
	Expect(cluster.Client.Patch(ctx, &p, patch)).To(Succeed())
}

// waitReady waits until policy name's Ready condition has reason, for its
// current generation, and returns it.
func waitReady(ctx context.Context, name, reason string) *metav1.Condition {
	return waitReadyIn(ctx, webNS, name, reason)
}

// waitReadyIn is waitReady for policy name of namespace ns.
func waitReadyIn(ctx context.Context, ns, name, reason string) *metav1.Condition {
	var cond *metav1.Condition
	EventuallyWithOffset(2, func(g Gomega) {
		var p v1alpha1.RateLimitPolicy
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
		cond = meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.ObservedGeneration).To(Equal(p.Generation))
		g.Expect(cond.Reason).To(Equal(reason), "Ready: %s", cond.Message)
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	return cond
}

// toPod sends GET path as tenant to pod's enforcer, on a connection of its
// own, and returns the status and headers of the answer.
func toPod(pod corev1.Pod, path, tenant string) (int, http.Header) {
	resp, _ := through(fmt.Sprintf("http://%s:15080%s", pod.Status.PodIP, path), tenant)
	defer resp.Body.Close() // read and closed already
	return resp.StatusCode, resp.Header
}

// codes sends n requests of tenant to path on pod and lists the statuses.
func codes(pod corev1.Pod, path, tenant string, n int) []int {
	var out []int
	for range n {
		code, _ := toPod(pod, path, tenant)
		out = append(out, code)
	}
	return out
}

// adminStatus reads /status of pod's enforcer with the read token.
func adminStatus(pod corev1.Pod, token string) string {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s:15081/status", pod.Status.PodIP), nil)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ExpectWithOffset(1, resp.StatusCode).To(Equal(http.StatusOK), "%s", body)
	return string(body)
}

// adminMetrics reads /metrics of pod's enforcer on its admin port.
func adminMetrics(pod corev1.Pod) string {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(fmt.Sprintf("http://%s:15081/metrics", pod.Status.PodIP))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return strings.TrimSpace(string(body))
}
