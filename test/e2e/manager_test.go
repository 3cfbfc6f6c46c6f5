package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/stack"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

const steadyPolicy = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: steady}
spec:
  selector: {matchLabels: {app: steady}}
  upstreamPort: 8080
  timeout: 1s
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: api
      algorithm: SlidingWindowLog
      limits: [{requests: 5, period: 1m}]
`

var _ = Describe("A manager restart", Ordered, func() {
	const ns = "e2e-manager"
	var eps []stack.Endpoint
	BeforeAll(func(ctx SpecContext) {
		eps = deploy(ctx, ns, steadyPolicy, "steady", 8080, 2)
		expectReady(ctx, ns, "steady", 2)
		// Whatever happens below, the next specs get a manager.
		DeferCleanup(func(ctx SpecContext) {
			if !sluice.Manager.Running() {
				Expect(sluice.Manager.Start(ctx)).To(Succeed())
			}
		})
	})

	configMap := func(ctx SpecContext) map[string]string {
		var cm corev1.ConfigMap
		Expect(sluice.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: wellknown.ConfigMapName}, &cm)).To(Succeed())
		return cm.Data
	}

	It("loses nothing: enforcing goes on, and the status converges again", func(ctx SpecContext) {
		config := configMap(ctx)
		pids := enforcerPids(ns)

		// Traffic throughout: each tenant within its limit, so every
		// request must pass, and each decision must be counted.
		var sent, failed atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			defer GinkgoRecover()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				r := request(eps[i%2], http.MethodGet, "/", "X-Tenant-ID", fmt.Sprintf("steady-%d", i/4))
				sent.Add(1)
				if r.code != http.StatusOK {
					failed.Add(1)
				}
			}
		})
		time.Sleep(time.Second)
		sluice.Manager.Kill()
		time.Sleep(2 * time.Second)
		Expect(sluice.Manager.Start(ctx)).To(Succeed())
		time.Sleep(time.Second)
		close(stop)
		wg.Wait()
		Expect(sent.Load()).To(BeNumerically(">=", 50), "traffic ran throughout the restart")
		Expect(failed.Load()).To(BeZero(), "of %d requests", sent.Load())

		expectReady(ctx, ns, "steady", 2)
		Eventually(func(g Gomega) {
			g.Expect(policy(ctx, ns, "steady").Status.Decisions.Allowed).To(BeNumerically(">=", sent.Load()))
		}).Should(Succeed(), "every decision made across the restart is counted")
		Expect(configMap(ctx)).To(Equal(config))
		Expect(enforcerPids(ns)).To(Equal(pids), "no enforcer restarted")
		for _, ep := range eps {
			Expect(enforcerContainers(ctx, ns, ep.Pod)).To(Equal(1))
		}
	})

	It("injects a pod created after the restart exactly once", func(ctx SpecContext) {
		createPods(ctx, ns, "steady", 8080, "steady-2")
		Expect(enforcerContainers(ctx, ns, "steady-2")).To(Equal(1))
		expectReady(ctx, ns, "steady", 3)
	})

	It("reports a pod created while the webhook was down, until it is recreated", func(ctx SpecContext) {
		sluice.Manager.Kill()
		// failurePolicy Ignore: the pod is created as it is.
		pod := stack.AppPod(ns, "steady-3", map[string]string{"app": "steady"}, 8080)
		Expect(sluice.Client.Create(ctx, pod)).To(Succeed())
		Expect(enforcerContainers(ctx, ns, "steady-3")).To(BeZero())
		Expect(sluice.Manager.Start(ctx)).To(Succeed())

		Eventually(func(g Gomega) {
			p := policy(ctx, ns, "steady")
			g.Expect(readyOf(p)).To(And(
				HaveField("Status", metav1.ConditionFalse),
				HaveField("Reason", v1alpha1.ReasonEnforcersNotReady),
				HaveField("Message", ContainSubstring("steady-3"))))
			g.Expect(p.Status.Enforcers.Selected).To(BeEquivalentTo(4))
			g.Expect(p.Status.Enforcers.Injected).To(BeEquivalentTo(3))
		}).Should(Succeed())
		Expect(enforcerContainers(ctx, ns, "steady-3")).To(BeZero(), "a running pod is never mutated")

		Expect(sluice.Client.Delete(ctx, pod)).To(Succeed())
		createPods(ctx, ns, "steady", 8080, "steady-3")
		Expect(enforcerContainers(ctx, ns, "steady-3")).To(Equal(1))
		expectReady(ctx, ns, "steady", 4)
	})
})
