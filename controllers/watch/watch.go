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

// Package watch holds what the policy controller and the status controller
// watch alike: both reconcile a namespace at a time, under the key of its
// ConfigMap, and count the same pods.
package watch

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// NamespaceKey is the key under which a namespace is reconciled: its
// ConfigMap's name.
func NamespaceKey(namespace string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: wellknown.ConfigMapName}
}

// NamespaceOf is the key of the namespace of obj.
func NamespaceOf(_ context.Context, obj client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: NamespaceKey(obj.GetNamespace())}}
}

// NamespaceWithPolicies maps an object (a pod) to its namespace when that
// has policies, read through c.
func NamespaceWithPolicies(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		var list v1alpha1.RateLimitPolicyList
		if err := c.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil || len(list.Items) == 0 {
			return nil
		}
		return NamespaceOf(ctx, obj)
	}
}

// PodCountChanged passes the pod events that can change how many pods a
// policy selects, and not the many status updates of running pods.
func PodCountChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldPod, okOld := e.ObjectOld.(*corev1.Pod)
			newPod, okNew := e.ObjectNew.(*corev1.Pod)
			if !okOld || !okNew {
				return true
			}
			return ActivePod(oldPod) != ActivePod(newPod) || !maps.Equal(oldPod.Labels, newPod.Labels)
		},
	}
}

// ActivePod says whether the pod runs or is about to: not being deleted,
// not finished.
func ActivePod(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp.IsZero() && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}
