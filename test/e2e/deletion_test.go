package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	enforcerstatus "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/testing/stack"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

const gonePolicies = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: gone-a}
spec:
  selector: {matchLabels: {app: gone}}
  upstreamPort: 8080
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules: [{name: a, match: {paths: [{prefix: /a}]}, algorithm: FixedWindow, limits: [{requests: 2, period: 1h}]}]
---
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: gone-b}
spec:
  selector: {matchLabels: {app: gone}}
  upstreamPort: 8080
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules: [{name: b, match: {paths: [{prefix: /b}]}, algorithm: FixedWindow, limits: [{requests: 2, period: 1h}]}]
`

var _ = Describe("Deleting policies", Ordered, func() {
	const ns = "e2e-deletion"
	var eps []stack.Endpoint
	BeforeAll(func(ctx SpecContext) {
		eps = deploy(ctx, ns, gonePolicies, "gone", 8080, 2)
		expectReady(ctx, ns, "gone-a", 2)
		expectReady(ctx, ns, "gone-b", 2)
	})

	statusCodes := func(path, tenant string) []int {
		var out []int
		for _, ep := range eps {
			out = append(out, request(ep, http.MethodGet, path, "X-Tenant-ID", tenant).code)
		}
		return out
	}

	It("keeps the last configuration while the ConfigMap is deleted by hand, and says so", func(ctx SpecContext) {
		Expect(statusCodes("/a", "frank")).To(Equal([]int{200, 200}))
		// With the manager down, nothing writes the ConfigMap again at once.
		sluice.Manager.Kill()
		DeferCleanup(func(ctx SpecContext) {
			if !sluice.Manager.Running() {
				Expect(sluice.Manager.Start(ctx)).To(Succeed())
			}
		})
		var cm corev1.ConfigMap
		Expect(sluice.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: wellknown.ConfigMapName}, &cm)).To(Succeed())
		Expect(sluice.Client.Delete(ctx, &cm)).To(Succeed())
		for _, ep := range eps {
			Eventually(func(g Gomega) {
				st, err := enforcerStatus(ep)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(st.Config.FileMissing).To(BeTrue())
				g.Expect(st.Config.State).To(Equal(enforcerstatus.StateEnforcing))
			}).Should(Succeed(), "pod %s says its file is gone", ep.Pod)
			Expect(adminMetrics(ep)).To(ContainSubstring("\nsluice_enforcer_config_file_missing 1\n"))
		}
		Expect(statusCodes("/a", "frank")).To(Equal([]int{429, 429}), "the last good configuration is still enforced")

		Expect(sluice.Manager.Start(ctx)).To(Succeed())
		Eventually(func() []string { return eventReasonsOf(ctx, ns, "gone-a") }).Should(ContainElement(v1alpha1.ReasonConfigMapRecreated))
		for _, ep := range eps {
			Eventually(func(g Gomega) {
				st, err := enforcerStatus(ep)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(st.Config.FileMissing).To(BeFalse())
			}).Should(Succeed(), "pod %s has its file again", ep.Pod)
		}
	})

	It("stops enforcing a deleted policy on every pod, and passes traffic through once the last one goes", func(ctx SpecContext) {
		Expect(append(statusCodes("/a", "erin"), statusCodes("/a", "erin")...)).To(Equal([]int{200, 200, 429, 429}), "one limit over both pods")
		Expect(append(statusCodes("/b", "erin"), statusCodes("/b", "erin")...)).To(Equal([]int{200, 200, 429, 429}))

		for _, ep := range eps {
			Expect(adminMetrics(ep)).To(ContainSubstring("\nsluice_enforcer_config_policies 2\n"), "pod %s enforces both", ep.Pod)
		}
		Expect(sluice.Client.Delete(ctx, policy(ctx, ns, "gone-a"))).To(Succeed())
		Eventually(func() []int { return statusCodes("/a", "erin") }).Should(Equal([]int{200, 200}), "gone-a is enforced nowhere")
		Expect(statusCodes("/b", "erin")).To(Equal([]int{429, 429}), "gone-b still is")

		Expect(sluice.Client.Delete(ctx, policy(ctx, ns, "gone-b"))).To(Succeed())
		Eventually(func() []int { return statusCodes("/b", "erin") }).Should(Equal([]int{200, 200}), "nothing is enforced")
		for _, ep := range eps {
			r := request(ep, http.MethodGet, "/b", "X-Tenant-ID", "erin")
			Expect(r.header.Get("X-RateLimit-Limit")).To(BeEmpty(), "pod %s applies no limit", ep.Pod)
			Expect(adminMetrics(ep)).To(ContainSubstring("\nsluice_enforcer_config_policies 0\n"), "pod %s says so", ep.Pod)
		}
		var cm corev1.ConfigMap
		Expect(sluice.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: wellknown.ConfigMapName}, &cm)).To(Succeed(),
			"the ConfigMap stays while injected pods read it")
		Expect(cm.Data[wellknown.ConfigKey]).To(ContainSubstring(`"policies":[]`))
		Expect(cm.OwnerReferences).To(BeEmpty())
	})

	It("deletes the ConfigMap with the last injected pod", func(ctx SpecContext) {
		for _, ep := range eps {
			pod := &corev1.Pod{}
			Expect(sluice.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ep.Pod}, pod)).To(Succeed())
			Expect(sluice.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
		}
		Eventually(func() bool {
			err := sluice.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: wellknown.ConfigMapName}, &corev1.ConfigMap{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
	})
})

// eventReasonsOf lists the reasons of the Events about policy name.
func eventReasonsOf(ctx context.Context, ns, name string) []string {
	var list eventsv1.EventList
	Expect(sluice.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "RateLimitPolicy" && e.Regarding.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// enforcerStatus is the enforcer's /status, read with the namespace's
// token as the manager does.
func enforcerStatus(ep stack.Endpoint) (enforcerstatus.Document, error) {
	var st enforcerstatus.Document
	token, err := sluice.StatusToken(context.Background(), ep.Namespace)
	if err != nil {
		return st, err
	}
	req, err := http.NewRequest(http.MethodGet, ep.Admin+enforcerstatus.Path, nil)
	if err != nil {
		return st, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := httpClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// adminMetrics reads the enforcer's /metrics.
func adminMetrics(ep stack.Endpoint) string {
	GinkgoHelper()
	resp, err := httpClient.Get(ep.Admin + "/metrics")
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	var b strings.Builder
	_, err = io.Copy(&b, resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return b.String()
}
