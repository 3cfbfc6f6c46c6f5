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
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/watch"
	"github.com/sluice-dev/sluice/internal/compile"
)

// upstreamConflicts refuses, of two policies that can select one pod with
// different upstream ports or protocols, the newer one: a pod's one
// enforcer forwards to one port, with one protocol. Two policies can select
// one pod when a running pod matches both, or when every pod the one
// selects also matches the other. Creation times count in seconds: of two
// created in the same second, the one published already is the older. The
// result is by policy name.
func upstreamConflicts(policies []*v1alpha1.RateLimitPolicy, pods []corev1.Pod, published func(*v1alpha1.RateLimitPolicy) bool) map[string]*compile.PolicyError {
	type candidate struct {
		policy   *v1alpha1.RateLimitPolicy
		selector labels.Selector
	}
	ordered := slices.Clone(policies)
	slices.SortStableFunc(ordered, func(a, b *v1alpha1.RateLimitPolicy) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		if pa, pb := published(a), published(b); pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	conflicts := map[string]*compile.PolicyError{}
	var kept []candidate
	for _, p := range ordered {
		selector, err := metav1.LabelSelectorAsSelector(&p.Spec.Selector)
		if err != nil || selector.Empty() {
			continue // compiling reports the selector
		}
		var conflict *compile.PolicyError
		for _, older := range kept {
			reason, message := upstreamDifference(older.policy, p)
			if reason == "" {
				continue
			}
			if why := overlap(older.selector, selector, pods); why != "" {
				conflict = &compile.PolicyError{Policy: p.Name, Reason: reason, Message: message(why)}
				break
			}
		}
		if conflict != nil {
			conflicts[p.Name] = conflict
			continue
		}
		kept = append(kept, candidate{policy: p, selector: selector})
	}
	return conflicts
}

// upstreamDifference says how newer forwards otherwise than older: the
// Accepted reason, and the message given why they select one pod; "" when
// they forward alike. The port is compared first.
func upstreamDifference(older, newer *v1alpha1.RateLimitPolicy) (string, func(why string) string) {
	if older.Spec.UpstreamPort != newer.Spec.UpstreamPort {
		return v1alpha1.ReasonConflictingUpstreamPorts, func(why string) string {
			return fmt.Sprintf("policy %s, created before, forwards to upstreamPort %d and this one to %d, and %s: a pod's one enforcer forwards to one port, "+
				"so give both policies the same upstreamPort, or selectors that no pod matches together",
				older.Name, older.Spec.UpstreamPort, newer.Spec.UpstreamPort, why)
		}
	}
	if a, b := older.Spec.UpstreamProtocolOrDefault(), newer.Spec.UpstreamProtocolOrDefault(); a != b {
		return v1alpha1.ReasonConflictingUpstreamProtocols, func(why string) string {
			return fmt.Sprintf("policy %s, created before, forwards with upstreamProtocol %s and this one with %s, and %s: a pod's one enforcer speaks one protocol to the application, "+
				"so give both policies the same upstreamProtocol (H2C for a gRPC server, HTTP1 otherwise), or selectors that no pod matches together",
				older.Name, a, b, why)
		}
	}
	return "", nil
}

// overlap says why two selectors select one pod, "" when they need not:
// a running pod matches both, or one selector's requirements include all
// of the other's.
func overlap(a, b labels.Selector, pods []corev1.Pod) string {
	for i := range pods {
		pod := &pods[i]
		if watch.ActivePod(pod) && a.Matches(labels.Set(pod.Labels)) && b.Matches(labels.Set(pod.Labels)) {
			return fmt.Sprintf("both select pod %s", pod.Name)
		}
	}
	if includes(a, b) || includes(b, a) {
		return "every pod one of them selects is selected by the other"
	}
	return ""
}

// includes says whether every requirement of general is one of specific's:
// then each pod specific selects, general selects too.
func includes(specific, general labels.Selector) bool {
	have, _ := specific.Requirements()
	want, _ := general.Requirements()
	for _, r := range want {
		if !slices.ContainsFunc(have, func(h labels.Requirement) bool { return h.Equal(r) }) {
			return false
		}
	}
	return true
}
