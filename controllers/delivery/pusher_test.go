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

package delivery

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/sluice-dev/sluice/enforcer/admin"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/reload"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/configpush"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// document is namespace shop's configuration at revision: one policy
// limiting pods labelled tier=gold to requests a minute.
func document(revision int64, requests int) []byte {
	return fmt.Appendf(nil, `{"schema":"sluice.dev/enforcer-config/v1","namespace":"shop","revision":%d,"policies":[{
"name":"gold","uid":"u-1","generation":1,"selector":{"matchLabels":{"tier":"gold"}},"replicas":1,"upstreamPort":8080,
"mode":"Enforce","failureMode":"Open","timeout":"50ms","responseHeaders":"Both","salt":"s",
"rules":[{"name":"all","match":{},"algorithm":"FixedWindow","cost":1,"identity":{"sources":[{"shared":{}}]},
"limits":[{"requests":%d,"period":"1m"}]}]}]}`, revision, requests)
}

type noSnapshot struct{}

func (noSnapshot) Snapshot() *engine.Snapshot { return nil }

// enforcer is a real Reloader behind a real admin listener on loopback,
// started from a file at revision 1 with labels tier=silver.
type enforcer struct {
	reloader *reload.Reloader
	port     int32
}

func startEnforcer(t *testing.T, writeToken string) *enforcer {
	t.Helper()
	dir := t.TempDir()
	path, labels := filepath.Join(dir, "config.json"), filepath.Join(dir, "labels")
	for file, data := range map[string][]byte{path: document(1, 10), labels: []byte("tier=\"silver\"\n")} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := reload.NewReloader(&reload.Source{ConfigPath: path, LabelsPath: labels}, func(*reload.Loaded) error { return nil },
		nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.New(admin.Options{Snapshots: noSnapshot{}, Reloads: r, Delivery: r,
		WriteToken: staticToken(writeToken), StatusToken: staticToken("read")}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	n, _ := strconv.Atoi(port)
	return &enforcer{reloader: r, port: int32(n)}
}

type staticToken string

func (s staticToken) Token() (string, error) { return string(s), nil }

// injectedPod is an injected pod of shop whose enforcer listens on port.
func injectedPod(name string, port int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: k8stypes.UID("uid-" + name), Labels: map[string]string{"tier": "silver"}},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: wellknown.EnforcerContainerName,
			Ports:        []corev1.ContainerPort{{Name: wellknown.AdminPortName, ContainerPort: port}},
			VolumeMounts: []corev1.VolumeMount{{Name: inject.WriteTokenVolumeName}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1"},
	}
}

func writeSecret(token string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: wellknown.AdminWriteSecretName},
		Data: map[string][]byte{wellknown.AdminTokenKey: []byte(token)}}
}

// startPusher runs a Pusher over a fake API holding objs; answers counts
// the answers by pod.
func startPusher(t *testing.T, objs ...client.Object) (*Pusher, client.Client, *sync.Map) {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	var answers sync.Map
	p := &Pusher{Pods: c, Secrets: c, Client: &configpush.Client{}, Workers: 4,
		OnAnswer: func(_ context.Context, pod *corev1.Pod, _ string, st *statusdoc.Document) {
			answers.Store(pod.Name, st.Config.Revision)
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p, c, &answers
}

// TestPusherDeliversInOrder: a published revision reaches every injected
// pod and its answer is recorded; an older one published after it is not
// pushed, and the enforcers keep the newer.
func TestPusherDeliversInOrder(t *testing.T) {
	g := NewWithT(t)
	a, b := startEnforcer(t, "w"), startEnforcer(t, "w")
	p, _, answers := startPusher(t, injectedPod("a", a.port), injectedPod("b", b.port), writeSecret("w"))

	g.Expect(p.Publish(context.Background(), "shop", document(5, 20), 5)).To(Succeed())
	for name, e := range map[string]*enforcer{"a": a, "b": b} {
		g.Eventually(func() int64 { return e.reloader.State().Revision }).Should(Equal(int64(5)), "pod %s", name)
		g.Eventually(func() any { v, _ := answers.Load(name); return v }).Should(Equal(int64(5)), "pod %s's answer", name)
	}
	g.Expect(p.Publish(context.Background(), "shop", document(4, 99), 4)).To(Succeed())
	g.Consistently(func() int64 { return a.reloader.State().Revision }).WithTimeout(500 * time.Millisecond).Should(Equal(int64(5)))
	g.Expect(a.reloader.State().Pushes).To(Equal(int64(1)))
}

// TestPusherBringsLabelsAndRetries: a pod relabelled is pushed its labels
// at the same revision, and another policy selects it; a pod whose
// enforcer refuses the token is retried until the Secret is right.
func TestPusherBringsLabelsAndRetries(t *testing.T) {
	g := NewWithT(t)
	e := startEnforcer(t, "right")
	p, c, _ := startPusher(t, injectedPod("a", e.port), writeSecret("wrong"))
	ctx := context.Background()
	g.Expect(p.Publish(ctx, "shop", document(5, 20), 5)).To(Succeed())
	g.Consistently(func() int64 { return e.reloader.State().Revision }).WithTimeout(500 * time.Millisecond).Should(Equal(int64(1)))

	g.Expect(c.Update(ctx, writeSecret("right"))).To(Succeed())
	g.Eventually(func() int64 { return e.reloader.State().Revision }).WithTimeout(15 * time.Second).Should(Equal(int64(5)))
	g.Expect(e.reloader.State().Config.Policies).To(BeEmpty(), "tier=silver: gold does not select it")

	pod := &corev1.Pod{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "a"}, pod)).To(Succeed())
	pod.Labels["tier"] = "gold"
	g.Expect(c.Update(ctx, pod)).To(Succeed())
	g.Expect(p.Publish(ctx, "shop", document(5, 20), 5)).To(Succeed())
	g.Eventually(func() int { return len(e.reloader.State().Config.Policies) }).Should(Equal(1), "the pushed labels select gold")
}
