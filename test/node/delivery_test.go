//go:build node

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// deliveryNS holds the fleet whose policies the delivery specs change.
const deliveryNS = "delivery"

// deliveryBound is how long a change may take to reach every enforcer in
// these specs: generous, to stay robust on a loaded machine; the figure
// measured is logged, and docs/performance.md gives it.
const deliveryBound = 10 * time.Second

// fleetPolicies: fleet limits /fleet on every pod of the fleet; gold
// limits /gold on the pods labelled tier=gold.
const fleetPolicies = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: fleet}
spec:
  selector: {matchLabels: {app: fleet}}
  upstreamPort: 8080
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules: [{name: fleet, match: {paths: [{prefix: /fleet}]}, algorithm: FixedWindow, limits: [{requests: 5, period: 1h}]}]
---
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: gold}
spec:
  selector: {matchLabels: {tier: gold}}
  upstreamPort: 8080
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules: [{name: gold, match: {paths: [{prefix: /gold}]}, algorithm: FixedWindow, limits: [{requests: 7, period: 1h}]}]
`

// deliverySpecs time policy changes from the write to every enforcer
// applying them, with the kubelet at its default sync (a minute), and
// stop the manager (Deployment manager in releaseNS) during an edit.
func deliverySpecs(manager string) {
	labels := map[string]string{"app": "fleet"}
	var pods []corev1.Pod

	It("applies an edit on every enforcer within seconds, the kubelet at its default sync", func(ctx SpecContext) {
		createNamespace(ctx, deliveryNS, map[string]string{"sluice.dev/injection": "enabled"})
		applyPolicies(ctx, deliveryNS, fleetPolicies)
		fleet := appDeployment(deliveryNS, "fleet", labels, cluster.Images["sluice-echo.tar"], []string{"--listen=:8080"}, 8080)
		fleet.Spec.Replicas = new(int32(3))
		Expect(cluster.Client.Create(ctx, fleet)).To(Succeed())
		pods = readyPods(ctx, deliveryNS, labels, 3)
		waitReadyIn(ctx, deliveryNS, "fleet", v1alpha1.ReasonEnforcersReady)
		Expect(limitsOn(pods, "/fleet")).To(HaveEach("5"))

		took := timeToEvery(pods, "/fleet", "6", func() { setLimit(ctx, deliveryNS, "fleet", 6) })
		applied := time.Now()
		report("policy edit to applied on every enforcer", took)
		Expect(took).To(BeNumerically("<", deliveryBound))
		waitReadyIn(ctx, deliveryNS, "fleet", v1alpha1.ReasonEnforcersReady)
		report("last enforcer applied to Ready for the new generation", time.Since(applied))
	})

	It("applies a relabel that makes another policy select a pod within seconds", func(ctx SpecContext) {
		Expect(limitsOn(pods[:1], "/gold")).To(HaveEach(""))
		took := timeToEvery(pods[:1], "/gold", "7", func() {
			var p corev1.Pod
			Expect(cluster.Client.Get(ctx, client.ObjectKeyFromObject(&pods[0]), &p)).To(Succeed())
			patch := client.MergeFrom(p.DeepCopy())
			p.Labels["tier"] = "gold"
			Expect(cluster.Client.Patch(ctx, &p, patch)).To(Succeed())
		})
		report("pod relabel to applied by its enforcer", took)
		Expect(took).To(BeNumerically("<", deliveryBound))
		Expect(limitsOn(pods[1:], "/gold")).To(HaveEach(""), "the pods not relabelled")
	})

	It("stops enforcing a deleted policy on every enforcer within seconds", func(ctx SpecContext) {
		took := timeToEvery(pods, "/fleet", "", func() {
			p := &v1alpha1.RateLimitPolicy{}
			p.Namespace, p.Name = deliveryNS, "fleet"
			Expect(cluster.Client.Delete(ctx, p)).To(Succeed())
		})
		report("policy deletion to unlimited on every enforcer", took)
		Expect(took).To(BeNumerically("<", deliveryBound))
		Expect(limitsOn(pods[:1], "/gold")).To(HaveEach("7"), "gold stays")
	})

	It("keeps enforcing while the manager is stopped, and applies the edit made meanwhile once it is back", func(ctx SpecContext) {
		kubectl(ctx, "-n", releaseNS, "scale", "deployment/"+manager, "--replicas=0")
		DeferCleanup(func(ctx SpecContext) {
			kubectl(ctx, "-n", releaseNS, "scale", "deployment/"+manager, "--replicas=2")
			kubectl(ctx, "-n", releaseNS, "rollout", "status", "deployment/"+manager, "--timeout=3m")
		})
		Eventually(func(g Gomega) {
			var list corev1.PodList
			g.Expect(cluster.Client.List(ctx, &list, client.InNamespace(releaseNS), client.MatchingLabels{"app.kubernetes.io/component": "manager"})).To(Succeed())
			g.Expect(list.Items).To(BeEmpty())
		}).WithTimeout(2 * time.Minute).Should(Succeed())

		setLimit(ctx, deliveryNS, "gold", 9)
		var secret corev1.Secret
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: deliveryNS, Name: wellknown.AdminSecretName}, &secret)).To(Succeed())
		// What the enforcer applies, from its /status: the answers' headers
		// also depend on Redis, which this spec does not test.
		Consistently(func(g Gomega) {
			var st struct {
				Policies []struct {
					Name       string `json:"name"`
					Generation int64  `json:"generation"`
				} `json:"policies"`
			}
			g.Expect(json.Unmarshal([]byte(adminStatus(pods[0], string(secret.Data[wellknown.AdminTokenKey]))), &st)).To(Succeed())
			g.Expect(st.Policies).To(HaveLen(1))
			g.Expect(st.Policies[0].Name).To(Equal("gold"))
			g.Expect(st.Policies[0].Generation).To(BeEquivalentTo(1))
		}).WithTimeout(5*time.Second).Should(Succeed(), "the enforcer keeps its configuration while no manager runs")
		Eventually(func() []string { return limitsOn(pods[:1], "/gold") }).WithTimeout(30*time.Second).
			Should(HaveEach("7"), "the enforcer keeps deciding with it")

		start := time.Now()
		kubectl(ctx, "-n", releaseNS, "scale", "deployment/"+manager, "--replicas=2")
		Eventually(func() []string { return limitsOn(pods[:1], "/gold") }).WithTimeout(3 * time.Minute).Should(HaveEach("9"))
		report("manager scaled up to the edit made while it was away applied", time.Since(start))
		waitReadyIn(ctx, deliveryNS, "gold", v1alpha1.ReasonEnforcersReady)
	})

	It("starts an enforcer while the manager is away with the namespace's configuration", func(ctx SpecContext) {
		kubectl(ctx, "-n", releaseNS, "rollout", "status", "deployment/"+manager, "--timeout=3m")
		kubectl(ctx, "-n", releaseNS, "scale", "deployment/"+manager, "--replicas=0")
		DeferCleanup(func(ctx SpecContext) {
			kubectl(ctx, "-n", releaseNS, "scale", "deployment/"+manager, "--replicas=2")
			kubectl(ctx, "-n", releaseNS, "rollout", "status", "deployment/"+manager, "--timeout=3m")
		})
		var cm corev1.ConfigMap
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: deliveryNS, Name: wellknown.ConfigMapName}, &cm)).To(Succeed())
		published, err := strconv.ParseInt(cm.Data[wellknown.RevisionKey], 10, 64)
		Expect(err).NotTo(HaveOccurred())

		killEnforcer(ctx, pods[0])
		var secret corev1.Secret
		Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: deliveryNS, Name: wellknown.AdminSecretName}, &secret)).To(Succeed())
		var st struct {
			Config struct {
				Revision int64 `json:"revision"`
			} `json:"config"`
		}
		Expect(json.Unmarshal([]byte(adminStatus(pods[0], string(secret.Data[wellknown.AdminTokenKey]))), &st)).To(Succeed())
		Expect(st.Config.Revision).To(Equal(published), "the restarted enforcer read the namespace's configuration from its volume")
		Expect(limitsOn(pods[:1], "/gold")).To(HaveEach("9"))
	})
}

// setLimit sets the first limit of policy name's first rule.
func setLimit(ctx context.Context, ns, name string, requests int64) {
	var p v1alpha1.RateLimitPolicy
	ExpectWithOffset(1, cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.Rules[0].Limits[0].Requests = requests
	ExpectWithOffset(1, cluster.Client.Patch(ctx, &p, patch)).To(Succeed())
}

// limitsOn is X-RateLimit-Limit of a request to path on each pod, each as
// a tenant of its own ("" when no limit applies).
func limitsOn(pods []corev1.Pod, path string) []string {
	out := make([]string, len(pods))
	for i, pod := range pods {
		_, header := toPod(pod, path, fmt.Sprintf("probe-%d", time.Now().UnixNano()))
		out[i] = header.Get("X-RateLimit-Limit")
	}
	return out
}

// timeToEvery runs write, then asks every pod's enforcer, every 20 ms,
// until each answers path with limit want; it returns how long the last
// one took, at most deliveryBound and a minute more.
func timeToEvery(pods []corev1.Pod, path, want string, write func()) time.Duration {
	start := time.Now()
	write()
	took := make([]time.Duration, len(pods))
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Go(func() {
			defer GinkgoRecover()
			for time.Since(start) < deliveryBound+time.Minute {
				if limitsOn([]corev1.Pod{pod}, path)[0] == want {
					took[i] = time.Since(start)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	longest := took[0]
	for _, t := range took {
		longest = max(longest, t)
		GinkgoWriter.Printf("  %s\n", t.Round(time.Millisecond))
	}
	return longest
}

func report(what string, took time.Duration) {
	AddReportEntry(what, took.Round(time.Millisecond).String())
	GinkgoWriter.Printf("%s: %s\n", what, took.Round(time.Millisecond))
}
