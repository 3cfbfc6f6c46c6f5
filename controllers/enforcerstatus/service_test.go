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

package enforcerstatus

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/conditions"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// servicePolicy is generation 4 of policy api, a policy of the rate limit
// service for domain shop-api, accepted by the policy controller.
func servicePolicy() *v1alpha1.RateLimitPolicy {
	p := acceptedPolicy()
	p.Spec.RateLimitService = &v1alpha1.RateLimitService{Domain: "shop-api"}
	return p
}

// servicePod is a running pod of the rate limit service, as the chart makes
// it, at ip with its admin port port.
func servicePod(name, ip string, port int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("shop/" + name),
			Labels:          map[string]string{wellknown.RateLimitServiceLabel: wellknown.RateLimitServiceLabelValue, "pod-template-hash": "5f6d7c8b9"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "sluice-ratelimit-5f6d7c8b9", Controller: new(true)}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: wellknown.RateLimitServiceContainerName, Ports: []corev1.ContainerPort{
			{Name: "grpc", ContainerPort: 8081}, {Name: wellknown.RateLimitServiceAdminPortName, ContainerPort: port}}}}},
		Status: corev1.PodStatus{PodIP: ip, Phase: corev1.PodRunning},
	}
}

func serviceAnswered(name string, st *statusdoc.Document) selectedPod {
	return selectedPod{Pod: servicePod(name, "10.0.0.7", 6070), Service: true, Polled: polledEnforcer{Address: "10.0.0.7:6070", Status: st}}
}

func TestSetEnforcerStatusOfServicePolicies(t *testing.T) {
	tests := []struct {
		name     string
		pods     []selectedPod
		status   metav1.ConditionStatus
		reason   string
		message  string
		counts   v1alpha1.EnforcerCounts
		decision v1alpha1.DecisionCounts
		kstatus  kstatus.Status
	}{{
		name:     "every service pod runs the generation",
		pods:     []selectedPod{serviceAnswered("sluice-ratelimit-a", healthy(4, 10, 2)), serviceAnswered("sluice-ratelimit-b", healthy(4, 5, 1))},
		status:   metav1.ConditionTrue,
		reason:   v1alpha1.ReasonEnforcersReady,
		message:  "2 of 2 rate limit service pods run generation 4 and reach Redis",
		counts:   v1alpha1.EnforcerCounts{Selected: 2, Injected: 2, Ready: 2, UpToDate: 2, Summary: "2/2"},
		decision: v1alpha1.DecisionCounts{Allowed: 15, Denied: 3},
		kstatus:  kstatus.CurrentStatus,
	}, {
		name:   "a service pod runs an older generation",
		pods:   []selectedPod{serviceAnswered("sluice-ratelimit-a", healthy(4, 1, 0)), serviceAnswered("sluice-ratelimit-b", healthy(3, 1, 0))},
		status: metav1.ConditionFalse,
		reason: v1alpha1.ReasonEnforcersStale,
		message: "1 of 2 rate limit service pods (pod sluice-ratelimit-b) runs generation 3 of the policy, not 4: " +
			"the service reloads ConfigMap sluice-ratelimit-policies when the kubelet updates it, usually within a minute",
		counts:   v1alpha1.EnforcerCounts{Selected: 2, Injected: 2, Ready: 2, UpToDate: 1, Summary: "2/2"},
		decision: v1alpha1.DecisionCounts{Allowed: 2},
		kstatus:  kstatus.InProgressStatus,
	}, {
		name:   "no service pod runs in the namespace",
		status: metav1.ConditionFalse,
		reason: v1alpha1.ReasonEnforcersNotReady,
		message: "no rate limit service pod runs in namespace shop (none is labelled sluice.dev/ratelimit-service=true), so nothing applies domain shop-api: " +
			"install the chart's rateLimitService (rateLimitService.enabled=true) in this namespace",
		counts:  v1alpha1.EnforcerCounts{Summary: "0/0"},
		kstatus: kstatus.InProgressStatus,
	}, {
		name: "a service pod does not answer, another has no IP yet",
		pods: []selectedPod{serviceAnswered("sluice-ratelimit-a", healthy(4, 0, 0)),
			{Pod: servicePod("sluice-ratelimit-b", "10.0.0.8", 6070), Service: true, Polled: polledEnforcer{Address: "10.0.0.8:6070", Err: "connection refused"}},
			{Pod: servicePod("sluice-ratelimit-c", "", 6070), Service: true, Polled: polledEnforcer{Err: "has no IP yet (Pending)"}}},
		status:  metav1.ConditionFalse,
		reason:  v1alpha1.ReasonEnforcersNotReady,
		message: "rate limit service on pod sluice-ratelimit-b does not answer on 10.0.0.8:6070: connection refused; pod sluice-ratelimit-c has no IP yet (Pending)",
		counts:  v1alpha1.EnforcerCounts{Selected: 3, Injected: 3, Ready: 1, UpToDate: 1, Summary: "1/3"},
		kstatus: kstatus.InProgressStatus,
	}, {
		name:     "a service pod has not loaded the policy",
		pods:     []selectedPod{serviceAnswered("sluice-ratelimit-a", healthy(4, 0, 0)), serviceAnswered("sluice-ratelimit-b", &statusdoc.Document{Ready: true})},
		status:   metav1.ConditionFalse,
		reason:   v1alpha1.ReasonEnforcersStale,
		message:  "the rate limit service on pod sluice-ratelimit-b has not loaded the policy yet",
		counts:   v1alpha1.EnforcerCounts{Selected: 2, Injected: 2, Ready: 2, UpToDate: 1, Summary: "2/2"},
		decision: v1alpha1.DecisionCounts{},
		kstatus:  kstatus.InProgressStatus,
	}, {
		name:    "a service pod cannot reach Redis",
		pods:    []selectedPod{serviceAnswered("sluice-ratelimit-a", redisDown(healthy(4, 0, 0), "Closed"))},
		status:  metav1.ConditionFalse,
		reason:  v1alpha1.ReasonDegraded,
		message: "rate limit service on pod sluice-ratelimit-a cannot reach Redis: dial tcp 10.0.0.9:6379: connect: connection refused; failing closed (requests get 503)",
		counts:  v1alpha1.EnforcerCounts{Selected: 1, Injected: 1, Ready: 1, UpToDate: 1, Degraded: 1, Summary: "1/1"},
		kstatus: kstatus.InProgressStatus,
	}, {
		// A service pod forwards nowhere: spec.upstreamPort, which a
		// service policy has none of, never asks for a restart.
		name:    "an upstream on the service's document asks for no restart",
		pods:    []selectedPod{serviceAnswered("sluice-ratelimit-a", forwardingTo(healthy(4, 0, 0), "http://127.0.0.1:9999"))},
		status:  metav1.ConditionTrue,
		reason:  v1alpha1.ReasonEnforcersReady,
		message: "1 of 1 rate limit service pod runs generation 4 and reaches Redis",
		counts:  v1alpha1.EnforcerCounts{Selected: 1, Injected: 1, Ready: 1, UpToDate: 1, Summary: "1/1"},
		kstatus: kstatus.CurrentStatus,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := servicePolicy()
			setEnforcerStatus(p, tt.pods, publishedEntries{}, t1)
			ready := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(tt.status))
			g.Expect(ready.Reason).To(Equal(tt.reason))
			g.Expect(ready.Message).To(Equal(tt.message))
			g.Expect(ready.ObservedGeneration).To(BeEquivalentTo(4))
			g.Expect(p.Status.Enforcers).To(Equal(tt.counts))
			g.Expect(p.Status.Decisions).To(Equal(tt.decision))
			g.Expect(kstatusOf(g, p)).To(Equal(tt.kstatus))
		})
	}
}

// TestReconcileStatusOfServicePolicies: a service policy counts the
// service's pods of its namespace and no pod its selector would match, a
// sidecar policy its selected pods only, and the published
// sluice-enforcer-config, which holds no entry of a service policy, never
// holds its Ready.
func TestReconcileStatusOfServicePolicies(t *testing.T) {
	g := NewWithT(t)
	sidecar := acceptedPolicy()
	sidecar.Name, sidecar.UID = "web", "0b1c2d3e-0000-4000-8000-000000000001"
	sidecar.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}
	sidecar.Spec.UpstreamPort = 8080
	service := servicePolicy()

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{wellknown.InjectionNamespaceLabel: wellknown.InjectionEnabled}}}
	svcA, svcB := servicePod("sluice-ratelimit-a", "10.0.0.7", 6070), servicePod("sluice-ratelimit-b", "10.0.0.8", 6070)
	app := deploymentPod("api-0", true)
	app.UID = "shop/api-0"
	app.Spec.InitContainers[0].Ports = []corev1.ContainerPort{{Name: wellknown.AdminPortName, ContainerPort: 15081}}
	app.Status = corev1.PodStatus{PodIP: "10.0.0.3", Phase: corev1.PodRunning}
	c := pollerTestClient(ns, sidecar, service, svcA, svcB, app)

	r := &Reconciler{Client: c}
	r.poller = newEnforcerPoller(c, c, func() *http.Client { return http.DefaultClient }, time.Hour, 1)
	serviceDoc := func(gen int64) *statusdoc.Document {
		st := healthy(gen, 7, 1)
		st.Policies[0].FailureMode = string(v1alpha1.FailureModeLocalFallback)
		st.Config.Hash = "service-config"
		return st
	}
	appDoc := healthy(4, 3, 0)
	appDoc.Policies[0].Name, appDoc.Policies[0].UID = "web", string(sidecar.UID)
	appDoc.Decisions = map[string]statusdoc.DecisionCounts{"web": {Allowed: 3}}
	r.poller.results[svcA.UID] = polledEnforcer{Address: "10.0.0.7:6070", Status: serviceDoc(4)}
	r.poller.results[svcB.UID] = polledEnforcer{Address: "10.0.0.8:6070", Status: serviceDoc(4)}
	r.poller.results[app.UID] = polledEnforcer{Address: "10.0.0.3:15081", Status: appDoc}

	var list v1alpha1.RateLimitPolicyList
	g.Expect(c.List(context.Background(), &list, client.InNamespace("shop"))).To(Succeed())
	pods, waiting, err := r.collectPods(context.Background(), "shop", list.Items)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waiting).To(BeFalse())

	policies := []*v1alpha1.RateLimitPolicy{&list.Items[0], &list.Items[1]}
	patch := conditions.NewPatch(conditions.EnforcerStatus, policies)
	// The sidecar configuration another pod count was published with.
	history := []seenConfig{{hash: "sidecar-config", entries: map[string]publishedEntry{
		string(service.UID): {Generation: 4, Replicas: 3, FailureMode: string(v1alpha1.FailureModeLocalFallback)}}}}
	r.reconcileStatus(patch, pods, history)

	byName := map[string]*v1alpha1.RateLimitPolicy{}
	for _, p := range policies {
		byName[p.Name] = p
	}
	g.Expect(byName["api"].Status.Enforcers).To(Equal(v1alpha1.EnforcerCounts{Selected: 2, Injected: 2, Ready: 2, UpToDate: 2, Summary: "2/2"}))
	g.Expect(byName["api"].Status.Decisions).To(Equal(v1alpha1.DecisionCounts{Allowed: 14, Denied: 2}))
	g.Expect(conditionsOf(byName["api"])[v1alpha1.ConditionReady]).To(Equal(wantCondition{metav1.ConditionTrue, v1alpha1.ReasonEnforcersReady}))
	g.Expect(byName["web"].Status.Enforcers).To(Equal(v1alpha1.EnforcerCounts{Selected: 1, Injected: 1, Ready: 1, UpToDate: 1, Summary: "1/1"}))
	g.Expect(byName["web"].Status.Decisions).To(Equal(v1alpha1.DecisionCounts{Allowed: 3}))

	// A service pod not polled yet is asked for; the namespace waits.
	svcC := servicePod("sluice-ratelimit-c", "10.0.0.9", 6070)
	g.Expect(c.Create(context.Background(), svcC)).To(Succeed())
	_, waiting, err = r.collectPods(context.Background(), "shop", list.Items)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waiting).To(BeTrue())
	g.Expect(r.poller.wanted).To(HaveKey(svcC.UID))

	// Without a service policy, the service's pods are not looked at.
	r.poller.wanted = map[types.UID]*corev1.Pod{}
	pods, waiting, err = r.collectPods(context.Background(), "shop", []v1alpha1.RateLimitPolicy{*sidecar})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waiting).To(BeFalse())
	g.Expect(pods).To(HaveLen(1))
	g.Expect(pods[0].Pod.Name).To(Equal("api-0"))
}

func TestAdminAddressOfServicePods(t *testing.T) {
	g := NewWithT(t)
	addr, why := adminAddress(servicePod("sluice-ratelimit-a", "10.0.0.7", 6070))
	g.Expect(addr).To(Equal("10.0.0.7:6070"), why)

	noPort := servicePod("sluice-ratelimit-a", "10.0.0.7", 6070)
	noPort.Spec.Containers[0].Ports = noPort.Spec.Containers[0].Ports[:1]
	addr, why = adminAddress(noPort)
	g.Expect(addr).To(BeEmpty())
	g.Expect(why).To(Equal("has a container ratelimit without a port named admin"))

	noContainer := servicePod("sluice-ratelimit-a", "10.0.0.7", 6070)
	noContainer.Spec.Containers[0].Name = "other"
	addr, why = adminAddress(noContainer)
	g.Expect(addr).To(BeEmpty())
	g.Expect(why).To(Equal("has no container named ratelimit"))

	// An enforcer's pod is as before, whatever its containers' other ports.
	app := deploymentPod("api-0", true)
	app.Spec.InitContainers[0].Ports = []corev1.ContainerPort{{Name: wellknown.AdminPortName, ContainerPort: 15081}}
	app.Spec.Containers = []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{{Name: wellknown.RateLimitServiceAdminPortName, ContainerPort: 9000}}}}
	app.Status.PodIP = "10.0.0.3"
	addr, why = adminAddress(app)
	g.Expect(why).To(BeEmpty())
	g.Expect(addr).To(Equal("10.0.0.3:15081"))
}

// TestPollerPollsServicePods: the poller reads the /status of the service's
// pods, with the namespace's token, in the namespaces with a service
// policy only.
func TestPollerPollsServicePods(t *testing.T) {
	g := NewWithT(t)
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		fmt.Fprint(w, `{"ready":true,"decisions":{"api":{"allowed":2}}}`)
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	inShop := servicePod("sluice-ratelimit-a", host, int32(p))
	inOther := servicePod("sluice-ratelimit-a", host, int32(p))
	inOther.Namespace, inOther.UID = "other", "other/sluice-ratelimit-a"
	policy := servicePolicy()
	policy.UID = ""
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: wellknown.AdminSecretName},
		Data: map[string][]byte{wellknown.AdminTokenKey: []byte("s3cret")}}
	c := pollerTestClient(policy, pollerTestPolicy("other"), inShop, inOther, token)
	poller := newEnforcerPoller(c, c, func() *http.Client { return srv.Client() }, time.Hour, 2)
	poller.pollAll(context.Background())

	res, ok := poller.polled(inShop)
	g.Expect(ok).To(BeTrue())
	g.Expect(res.Status).NotTo(BeNil(), res.Err)
	g.Expect(res.Status.Decisions["api"].Allowed).To(BeEquivalentTo(2))
	g.Expect(auth).To(Equal([]string{"Bearer s3cret"}))
	_, ok = poller.polled(inOther)
	g.Expect(ok).To(BeFalse(), "namespace other has no service policy")
}
