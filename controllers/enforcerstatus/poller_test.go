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
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// TestPollerEnqueuesWhatChanged: one pass polls every namespace at once,
// an enforcer that never answers costs its own timeout only, and only the
// namespaces whose answers changed are enqueued.
func TestPollerEnqueuesWhatChanged(t *testing.T) {
	g := NewWithT(t)
	var allowed atomic.Int64
	answering := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"ready":true,"decisions":{"api":{"allowed":%d}}}`, allowed.Load())
	}))
	defer answering.Close()
	silent := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer silent.Close()

	objs := []client.Object{pollerTestPolicy("shop"), pollerTestPolicy("slow"), pollerTestPod("shop", "api-0", answering)}
	for i := range 4 {
		objs = append(objs, pollerTestPod("slow", fmt.Sprintf("api-%d", i), silent))
	}
	c := pollerTestClient(objs...)
	httpClient := &http.Client{Timeout: 200 * time.Millisecond}
	p := newEnforcerPoller(c, c, func() *http.Client { return httpClient }, time.Hour, 16)

	enqueued := func() []string {
		var out []string
		for {
			select {
			case e := <-p.changed:
				out = append(out, e.Object.GetNamespace()+"/"+e.Object.GetName())
			default:
				return out
			}
		}
	}
	start := time.Now()
	p.pollAll(context.Background())
	g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second), "the silent enforcers are polled at once, each within the timeout")
	g.Expect(enqueued()).To(ConsistOf("shop/"+wellknown.ConfigMapName, "slow/"+wellknown.ConfigMapName))

	shopPod := &corev1.Pod{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "api-0"}, shopPod)).To(Succeed())
	res, ok := p.polled(shopPod)
	g.Expect(ok).To(BeTrue())
	g.Expect(res.Status).NotTo(BeNil())

	p.pollAll(context.Background())
	g.Expect(enqueued()).To(BeEmpty(), "nothing changed")

	allowed.Store(3)
	p.pollAll(context.Background())
	g.Expect(enqueued()).To(ConsistOf("shop/" + wellknown.ConfigMapName))
	res, _ = p.polled(shopPod)
	g.Expect(res.Status.Decisions["api"].Allowed).To(BeEquivalentTo(3))
}

// TestPollerDoesNotWaitForSilentNamespaces: a namespace is enqueued as
// soon as its own enforcers answered, while another namespace's enforcers
// that did not answer last time hold every request of their own lane; a
// pod Reconcile asks for is polled outside the pass.
func TestPollerDoesNotWaitForSilentNamespaces(t *testing.T) {
	g := NewWithT(t)
	var polls atomic.Int64
	answering := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"ready":true,"decisions":{"api":{"allowed":%d}}}`, polls.Add(1))
	}))
	defer answering.Close()
	var hold atomic.Bool
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer silent.Close()
	defer close(release)

	objs := []client.Object{pollerTestPolicy("shop"), pollerTestPolicy("slow"), pollerTestPod("shop", "api-0", answering)}
	for i := range 4 {
		objs = append(objs, pollerTestPod("slow", fmt.Sprintf("api-%d", i), silent))
	}
	c := pollerTestClient(objs...)
	httpClient := &http.Client{Timeout: time.Minute}
	// Two workers: as many as the silent pods could take at once.
	p := newEnforcerPoller(c, c, func() *http.Client { return httpClient }, time.Hour, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	p.pollAll(ctx) // the slow namespace's enforcers answer 503: not answering
	for len(p.changed) > 0 {
		<-p.changed
	}

	hold.Store(true)
	passDone := make(chan struct{})
	go func() { defer close(passDone); p.pollAll(ctx) }()
	var first event.GenericEvent
	g.Eventually(p.changed).WithTimeout(30 * time.Second).Should(Receive(&first))
	g.Expect(first.Object.GetNamespace()).To(Equal("shop"), "the answering namespace is enqueued while the other's enforcers hold their requests")
	g.Expect(passDone).NotTo(BeClosed())

	// A pod that appears mid-pass is polled when asked, in its own lane.
	go p.pollAsked(ctx)
	late := pollerTestPod("shop", "api-1", answering).(*corev1.Pod)
	p.ask(late)
	var asked event.GenericEvent
	g.Eventually(p.changed).WithTimeout(30 * time.Second).Should(Receive(&asked))
	g.Expect(asked.Object.GetNamespace()).To(Equal("shop"))
	res, ok := p.polled(late)
	g.Expect(ok).To(BeTrue())
	g.Expect(res.Status).NotTo(BeNil())
	g.Expect(passDone).NotTo(BeClosed(), "still held by the slow namespace")
}

func pollerTestPolicy(namespace string) client.Object {
	return &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: namespace},
		Spec: v1alpha1.RateLimitPolicySpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}}}
}

// pollerTestPod is a running pod whose enforcer's admin port is srv.
func pollerTestPod(namespace, name string, srv *httptest.Server) client.Object {
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(namespace + "/" + name), Labels: map[string]string{"app": "api"}},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: wellknown.EnforcerContainerName,
			Ports: []corev1.ContainerPort{{Name: wellknown.AdminPortName, ContainerPort: int32(p)}}}}},
		Status: corev1.PodStatus{PodIP: host, Phase: corev1.PodRunning},
	}
}

func pollerTestClient(objs ...client.Object) client.Client {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}
