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
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/admin"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/metrics"
	"github.com/sluice-dev/sluice/enforcer/reload"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

type fixedToken string

func (f fixedToken) Token() (string, error) { return string(f), nil }

// unloaded is an enforcer that has loaded no configuration yet.
type unloaded struct{}

func (unloaded) Snapshot() *engine.Snapshot { return nil }
func (unloaded) State() reload.State        { return reload.State{} }

// TestPollSendsTheNamespaceToken polls an enforcer's real admin handler
// that requires a token, with the right one, a wrong one and none.
func TestPollSendsTheNamespaceToken(t *testing.T) {
	srv := httptest.NewServer(admin.New(admin.Options{
		Snapshots: unloaded{}, Reloads: unloaded{}, Metrics: metrics.NewMetrics("test"), StatusToken: fixedToken("right"),
	}))
	t.Cleanup(srv.Close)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "api-0"},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: wellknown.EnforcerContainerName,
			Ports: []corev1.ContainerPort{{Name: wellknown.AdminPortName, ContainerPort: int32(srv.Listener.Addr().(*net.TCPAddr).Port)}}}}},
		Status: corev1.PodStatus{PodIP: "127.0.0.1"}}
	for _, tc := range []struct {
		token   string
		refused bool
		err     string
	}{
		{token: "right"},
		{token: "wrong", refused: true, err: "enforcer refused the status credential: 401 Unauthorized: wrong bearer token"},
		{token: "", refused: true, err: "the namespace has no Secret sluice-enforcer-admin yet"},
	} {
		g := NewWithT(t)
		got := pollEnforcer(context.Background(), http.DefaultClient, pod, tc.token)
		g.Expect(got.Refused).To(Equal(tc.refused), got.Err)
		if tc.err == "" {
			g.Expect(got.Err).To(BeEmpty())
			g.Expect(got.Status).NotTo(BeNil())
			continue
		}
		g.Expect(got.Status).To(BeNil())
		g.Expect(got.Err).To(ContainSubstring(tc.err))
	}
}

func TestRefusedCredentialIsExplained(t *testing.T) {
	g := NewWithT(t)
	p := acceptedPolicy()
	refused := answered("api-0", nil)
	refused.Polled = polledEnforcer{Address: "10.0.0.3:15081", Refused: true,
		Err: "enforcer refused the status credential: 401 Unauthorized: wrong bearer token"}
	setEnforcerStatus(p, []selectedPod{refused}, publishedEntries{}, t0)
	ready := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Message).To(ContainSubstring("pod api-0: enforcer refused the status credential: 401 Unauthorized: wrong bearer token (on 10.0.0.3:15081)"))
	g.Expect(ready.Message).To(ContainSubstring("Secret sluice-enforcer-admin"))
}
