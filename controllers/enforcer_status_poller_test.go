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

package controllers

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

	"github.com/sluice-dev/sluice/api/v1alpha1"
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

	policy := func(namespace string) client.Object {
		return &v1alpha1.RateLimitPolicy{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: namespace},
			Spec: v1alpha1.RateLimitPolicySpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}}}
	}
	pod := func(namespace, name string, srv *httptest.Server) client.Object {
		host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		p, _ := strconv.Atoi(port)
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(namespace + "/" + name), Labels: map[string]string{"app": "api"}},
			Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: EnforcerContainerName,
				Ports: []corev1.ContainerPort{{Name: AdminPortName, ContainerPort: int32(p)}}}}},
			Status: corev1.PodStatus{PodIP: host, Phase: corev1.PodRunning},
		}
	}
	objs := []client.Object{policy("shop"), policy("slow"), pod("shop", "api-0", answering)}
	for i := range 4 {
		objs = append(objs, pod("slow", fmt.Sprintf("api-%d", i), silent))
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
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
	g.Expect(enqueued()).To(ConsistOf("shop/"+ConfigMapName, "slow/"+ConfigMapName))

	shopPod := &corev1.Pod{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "api-0"}, shopPod)).To(Succeed())
	res, ok := p.polled(shopPod)
	g.Expect(ok).To(BeTrue())
	g.Expect(res.Status).NotTo(BeNil())

	p.pollAll(context.Background())
	g.Expect(enqueued()).To(BeEmpty(), "nothing changed")

	allowed.Store(3)
	p.pollAll(context.Background())
	g.Expect(enqueued()).To(ConsistOf("shop/" + ConfigMapName))
	res, _ = p.polled(shopPod)
	g.Expect(res.Status.Decisions["api"].Allowed).To(BeEquivalentTo(3))
}
