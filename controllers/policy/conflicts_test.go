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

package policy

import (
	"cmp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// TestUpstreamConflicts: of two policies that can select one pod with
// different upstream ports or protocols, the newer is refused, whether a
// pod matches both yet or one selector includes the other; disjoint
// selectors are fine.
func TestUpstreamConflicts(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	policy := func(name string, age int, port int32, labels map[string]string) *v1alpha1.RateLimitPolicy {
		return &v1alpha1.RateLimitPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created.Add(-time.Duration(age) * time.Hour))},
			Spec:       v1alpha1.RateLimitPolicySpec{Selector: metav1.LabelSelector{MatchLabels: labels}, UpstreamPort: port},
		}
	}
	withProtocol := func(p *v1alpha1.RateLimitPolicy, protocol v1alpha1.UpstreamProtocol) *v1alpha1.RateLimitPolicy {
		p.Spec.UpstreamProtocol = protocol
		return p
	}
	pod := func(name string, labels map[string]string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	tests := []struct {
		name     string
		policies []*v1alpha1.RateLimitPolicy
		pods     []corev1.Pod
		refused  map[string]string // name -> message substring
		// reason is the reason of the refusals, ConflictingUpstreamPorts
		// when empty.
		reason string
		// published names the policy the published configuration holds.
		published string
	}{{
		name:     "same selector, other port: the newer is refused",
		policies: []*v1alpha1.RateLimitPolicy{policy("v2", 1, 9090, map[string]string{"app": "api"}), policy("api", 2, 8080, map[string]string{"app": "api"})},
		refused:  map[string]string{"v2": "policy api, created before, forwards to upstreamPort 8080 and this one to 9090, and every pod one of them selects is selected by the other"},
	}, {
		name: "a narrower selector is included",
		policies: []*v1alpha1.RateLimitPolicy{policy("api", 2, 8080, map[string]string{"app": "api", "tier": "web"}),
			policy("wide", 1, 9090, map[string]string{"app": "api"})},
		refused: map[string]string{"wide": "policy api, created before"},
	}, {
		name: "a pod matches both",
		policies: []*v1alpha1.RateLimitPolicy{policy("api", 2, 8080, map[string]string{"app": "api"}),
			policy("web", 1, 9090, map[string]string{"tier": "web"})},
		pods:    []corev1.Pod{pod("api-0", map[string]string{"app": "api", "tier": "web"})},
		refused: map[string]string{"web": "both select pod api-0"},
	}, {
		name: "disjoint selectors",
		policies: []*v1alpha1.RateLimitPolicy{policy("api", 2, 8080, map[string]string{"app": "api"}),
			policy("web", 1, 9090, map[string]string{"tier": "web"})},
		pods: []corev1.Pod{pod("api-0", map[string]string{"app": "api"}), pod("web-0", map[string]string{"tier": "web"})},
	}, {
		name: "created in the same second: the published one is the older",
		policies: []*v1alpha1.RateLimitPolicy{policy("public-api", 1, 8080, map[string]string{"app": "api"}),
			policy("api-v2", 1, 9090, map[string]string{"app": "api"})},
		published: "public-api",
		refused:   map[string]string{"api-v2": "policy public-api, created before"},
	}, {
		name: "same port",
		policies: []*v1alpha1.RateLimitPolicy{policy("api", 2, 8080, map[string]string{"app": "api"}),
			policy("v2", 1, 8080, map[string]string{"app": "api"})},
	}, {
		name: "same port, other protocol: the newer is refused",
		policies: []*v1alpha1.RateLimitPolicy{withProtocol(policy("grpc", 1, 8080, map[string]string{"app": "api"}), v1alpha1.UpstreamProtocolH2C),
			policy("api", 2, 8080, map[string]string{"app": "api"})},
		reason: v1alpha1.ReasonConflictingUpstreamProtocols,
		refused: map[string]string{"grpc": "policy api, created before, forwards with upstreamProtocol HTTP1 and this one with H2C, " +
			"and every pod one of them selects is selected by the other: a pod's one enforcer speaks one protocol to the application, " +
			"so give both policies the same upstreamProtocol (H2C for a gRPC server, HTTP1 otherwise), or selectors that no pod matches together"},
	}, {
		name: "other protocol, a pod matches both",
		policies: []*v1alpha1.RateLimitPolicy{withProtocol(policy("grpc", 2, 8080, map[string]string{"app": "api"}), v1alpha1.UpstreamProtocolH2C),
			withProtocol(policy("web", 1, 8080, map[string]string{"tier": "web"}), v1alpha1.UpstreamProtocolHTTP1)},
		pods:    []corev1.Pod{pod("api-0", map[string]string{"app": "api", "tier": "web"})},
		reason:  v1alpha1.ReasonConflictingUpstreamProtocols,
		refused: map[string]string{"web": "policy grpc, created before, forwards with upstreamProtocol H2C and this one with HTTP1, and both select pod api-0"},
	}, {
		name: "other protocol, disjoint selectors",
		policies: []*v1alpha1.RateLimitPolicy{withProtocol(policy("grpc", 2, 8080, map[string]string{"app": "grpc"}), v1alpha1.UpstreamProtocolH2C),
			policy("web", 1, 8080, map[string]string{"app": "web"})},
		pods: []corev1.Pod{pod("grpc-0", map[string]string{"app": "grpc"}), pod("web-0", map[string]string{"app": "web"})},
	}, {
		name: "an unset protocol is HTTP1",
		policies: []*v1alpha1.RateLimitPolicy{policy("api", 2, 8080, map[string]string{"app": "api"}),
			withProtocol(policy("v2", 1, 8080, map[string]string{"app": "api"}), v1alpha1.UpstreamProtocolHTTP1)},
	}, {
		name: "other port and protocol: the port is named",
		policies: []*v1alpha1.RateLimitPolicy{policy("api", 2, 8080, map[string]string{"app": "api"}),
			withProtocol(policy("grpc", 1, 9090, map[string]string{"app": "api"}), v1alpha1.UpstreamProtocolH2C)},
		refused: map[string]string{"grpc": "policy api, created before, forwards to upstreamPort 8080 and this one to 9090"},
	}, {
		name: "a refused policy does not refuse a third",
		policies: []*v1alpha1.RateLimitPolicy{policy("api", 3, 8080, map[string]string{"app": "api"}),
			withProtocol(policy("grpc", 2, 8080, map[string]string{"app": "api"}), v1alpha1.UpstreamProtocolH2C),
			policy("v2", 1, 8080, map[string]string{"app": "api"})},
		reason:  v1alpha1.ReasonConflictingUpstreamProtocols,
		refused: map[string]string{"grpc": "policy api, created before"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := upstreamConflicts(tt.policies, tt.pods, func(p *v1alpha1.RateLimitPolicy) bool { return p.Name == tt.published })
			g.Expect(got).To(HaveLen(len(tt.refused)))
			for name, msg := range tt.refused {
				g.Expect(got).To(HaveKey(name))
				g.Expect(got[name].Reason).To(Equal(cmp.Or(tt.reason, v1alpha1.ReasonConflictingUpstreamPorts)))
				g.Expect(got[name].Message).To(ContainSubstring(msg))
			}
		})
	}
}
