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
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// The policies with spec.rateLimitService select no pods: the rate limit
// service's pods of their namespace apply them, and report on the
// enforcer's /status document, on their admin port, with the namespace's
// token. Their status is computed from those pods as a sidecar policy's is
// from the enforcers of the pods it selects.

// isRateLimitServicePod says whether the pod is one of the rate limit
// service's, by the label its chart sets.
func isRateLimitServicePod(pod *corev1.Pod) bool {
	return pod.Labels[wellknown.RateLimitServiceLabel] == wellknown.RateLimitServiceLabelValue
}

// hasRateLimitServicePolicy says whether some policy, not being deleted, is
// one of the rate limit service.
func hasRateLimitServicePolicy(policies []v1alpha1.RateLimitPolicy) bool {
	return slices.ContainsFunc(policies, func(p v1alpha1.RateLimitPolicy) bool {
		return p.DeletionTimestamp.IsZero() && compile.IsRateLimitService(p)
	})
}

// rateLimitServiceContainer is the service's container of the pod, nil
// when it has none.
func rateLimitServiceContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == wellknown.RateLimitServiceContainerName {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}
