package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/testing/stack"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// deploy creates an injection-enabled namespace, the policies in
// policyYAML, and replicas pods labelled app=<app> whose application
// listens on port; it returns their enforcers once ready.
func deploy(ctx context.Context, namespace, policyYAML, app string, port int32, replicas int) []stack.Endpoint {
	GinkgoHelper()
	Expect(sluice.CreateNamespace(ctx, namespace)).To(Succeed())
	policies, err := stack.ParsePolicies([]byte(policyYAML))
	Expect(err).NotTo(HaveOccurred())
	Expect(sluice.CreatePolicies(ctx, namespace, policies...)).To(Succeed())
	for _, p := range policies {
		Eventually(func(g Gomega) {
			g.Expect(apimeta.IsStatusConditionTrue(policy(ctx, namespace, p.Name).Status.Conditions, v1alpha1.ConditionAccepted)).To(BeTrue())
		}).Should(Succeed(), "policy %s is accepted", p.Name)
	}
	var names []string
	for i := range replicas {
		names = append(names, fmt.Sprintf("%s-%d", app, i))
	}
	eps := createPods(ctx, namespace, app, port, names...)
	expectConfigLoaded(ctx, namespace, eps)
	return eps
}

// expectConfigLoaded waits until every enforcer serves the configuration
// published last. Ready does not wait for that: it follows the policies'
// generations, while a new pod also changes the replica count that
// LocalFallback shares a limit by.
func expectConfigLoaded(ctx context.Context, namespace string, eps []stack.Endpoint) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var cm corev1.ConfigMap
		g.Expect(sluice.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: wellknown.ConfigMapName}, &cm)).To(Succeed())
		want := cm.Annotations[wellknown.ConfigHashAnnotation]
		g.Expect(want).NotTo(BeEmpty())
		for _, ep := range eps {
			g.Expect(configHash(ep)).To(Equal(want), "the configuration %s serves", ep.Pod)
		}
	}).Should(Succeed())
}

// configHash is the hash of the configuration an enforcer serves, from its
// /status, read with the namespace's token as the manager does.
func configHash(ep stack.Endpoint) (string, error) {
	token, err := sluice.StatusToken(context.Background(), ep.Namespace)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequest(http.MethodGet, ep.Admin+"/status", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var st struct {
		Config struct {
			Hash string `json:"hash"`
		} `json:"config"`
	}
	return st.Config.Hash, json.NewDecoder(resp.Body).Decode(&st)
}

// createPods creates application pods and waits for their enforcers.
func createPods(ctx context.Context, namespace, app string, port int32, names ...string) []stack.Endpoint {
	GinkgoHelper()
	for _, name := range names {
		Expect(sluice.Client.Create(ctx, stack.AppPod(namespace, name, map[string]string{"app": app}, port))).To(Succeed())
	}
	eps, err := sluice.WaitReady(ctx, namespace, names...)
	Expect(err).NotTo(HaveOccurred())
	return eps
}

func policy(ctx context.Context, namespace, name string) *v1alpha1.RateLimitPolicy {
	GinkgoHelper()
	p, err := sluice.Policy(ctx, namespace, name)
	Expect(err).NotTo(HaveOccurred())
	return p
}

// readyOf is the policy's Ready condition (an empty one when absent).
func readyOf(p *v1alpha1.RateLimitPolicy) metav1.Condition {
	if c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// beReady expects the policy's current generation Ready on every selected pod.
func expectReady(ctx context.Context, namespace, name string, pods int32) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		p := policy(ctx, namespace, name)
		ready := readyOf(p)
		g.Expect(ready).To(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("ObservedGeneration", p.Generation)), "Ready of policy %s: %s: %s", name, ready.Reason, ready.Message)
		g.Expect(p.Status.Enforcers.UpToDate).To(Equal(pods))
	}).Should(Succeed())
}

// editPolicy changes a policy, retrying on conflicts with the controllers.
func editPolicy(ctx context.Context, namespace, name string, edit func(*v1alpha1.RateLimitPolicy)) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := sluice.Policy(ctx, namespace, name)
		if err != nil {
			return err
		}
		edit(p)
		return sluice.Client.Update(ctx, p)
	})).To(Succeed())
}

// enforcerContainers counts the enforcer containers of a pod.
func enforcerContainers(ctx context.Context, namespace, name string) int {
	GinkgoHelper()
	var pod corev1.Pod
	Expect(sluice.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &pod)).To(Succeed())
	n := 0
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.Name == wellknown.EnforcerContainerName {
				n++
			}
		}
	}
	return n
}

// enforcerPids maps each pod of the namespace to its enforcer's process id.
func enforcerPids(namespace string) map[string]int {
	out := map[string]int{}
	for _, p := range sluice.Kubelet.Pods() {
		if p.Namespace == namespace {
			out[p.Name] = p.Sidecars[wellknown.EnforcerContainerName].Pid
		}
	}
	return out
}

// served counts the requests that reached the applications of the pods.
func served(eps []stack.Endpoint) int64 {
	var n int64
	for _, ep := range eps {
		n += sluice.Kubelet.Served(ep.Namespace, ep.Pod)
	}
	return n
}

// reply is one answer of an enforcer, with when the request was sent and
// its answer received: the enforcer decided in between.
type reply struct {
	pod            string
	code           int
	header         http.Header
	body           string
	sent, received time.Time
}

var httpClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16},
}

// request sends one request; headers are name, value pairs.
func request(ep stack.Endpoint, method, path string, headers ...string) reply {
	GinkgoHelper()
	req, err := http.NewRequest(method, ep.HTTP+path, nil)
	Expect(err).NotTo(HaveOccurred())
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	r := reply{pod: ep.Pod, sent: time.Now()}
	resp, err := httpClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r.received, r.code, r.header, r.body = time.Now(), resp.StatusCode, resp.Header, string(body)
	return r
}

// spread sends n requests one after the other, alternating between the
// endpoints like a Service.
func spread(eps []stack.Endpoint, n int, method, path string, headers ...string) []reply {
	GinkgoHelper()
	out := make([]reply, 0, n)
	for i := range n {
		out = append(out, request(eps[i%len(eps)], method, path, headers...))
	}
	return out
}

// flood sends requests from workers at once, each alternating between the
// endpoints, for d.
func flood(eps []stack.Endpoint, workers int, d time.Duration, method, path string, headers ...string) []reply {
	GinkgoHelper()
	var mu sync.Mutex
	var out []reply
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for w := range workers {
		wg.Go(func() {
			defer GinkgoRecover()
			for i := w; time.Now().Before(end); i++ {
				r := request(eps[i%len(eps)], method, path, headers...)
				mu.Lock()
				out = append(out, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// codes counts replies by status code.
func codes(replies []reply) map[int]int {
	out := map[int]int{}
	for _, r := range replies {
		out[r.code]++
	}
	return out
}

// withCode keeps the replies of one status code.
func withCode(replies []reply, code int) []reply {
	var out []reply
	for _, r := range replies {
		if r.code == code {
			out = append(out, r)
		}
	}
	return out
}

// limitHeaders are the X-RateLimit-Limit values in the replies.
func limitHeaders(replies []reply) []string {
	var out []string
	for _, r := range replies {
		out = append(out, r.header.Get("X-Ratelimit-Limit"))
	}
	return out
}
