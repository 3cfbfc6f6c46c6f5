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
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/watch"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// storageSecretIndex indexes policies by the Secrets they name: their
// storage's and their jwtClaim key sets'.
const storageSecretIndex = "spec.storage.secretRef.name"

// SetupWithManager registers the policy controller. It reconciles a
// namespace when one of its policies is created, deleted or changes its
// spec; when a pod starts, stops or changes labels (the pod counts are part
// of the configuration, and injected pods keep the ConfigMap of a namespace
// without policies); when a Secret that a policy's storage or key set names appears,
// changes or goes; when someone edits or deletes the ConfigMap or the
// admin Secret; and, with NetworkPolicy set, when a NetworkPolicy changes.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, concurrency int) error {
	err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.RateLimitPolicy{}, storageSecretIndex, func(obj client.Object) []string {
		return secretsNamed(obj.(*v1alpha1.RateLimitPolicy))
	})
	if err != nil {
		return fmt.Errorf("index RateLimitPolicies by storage Secret: %w", err)
	}
	if concurrency < 1 {
		concurrency = 1
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("ratelimitpolicy").
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Watches(&v1alpha1.RateLimitPolicy{}, handler.EnqueueRequestsFromMapFunc(watch.NamespaceOf),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(watch.NamespaceOf),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
				return obj.GetName() == wellknown.ConfigMapName || obj.GetName() == wellknown.ServiceConfigMapName
			}))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(namespaceWithPoliciesOrEnforcer(r)),
			builder.WithPredicates(watch.PodCountChanged())).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.namespaceUsingSecret))
	if r.NetworkPolicy != nil {
		// Ours, to restore it; the user's, to step back when they isolate pods.
		b = b.Watches(&networkingv1.NetworkPolicy{}, handler.EnqueueRequestsFromMapFunc(watch.NamespaceWithPolicies(r)))
	}
	return b.Complete(r)
}

// namespaceWithPoliciesOrEnforcer maps a pod to its namespace when that has
// policies, or when the pod runs an enforcer or mounts the rate limit
// service's ConfigMap: the ConfigMaps of a namespace without policies stay
// while such pods run.
func namespaceWithPoliciesOrEnforcer(c client.Reader) handler.MapFunc {
	withPolicies := watch.NamespaceWithPolicies(c)
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		if pod, ok := obj.(*corev1.Pod); ok && (inject.HasEnforcer(pod) || mountsConfigMap(pod, wellknown.ServiceConfigMapName)) {
			return watch.NamespaceOf(ctx, obj)
		}
		return withPolicies(ctx, obj)
	}
}

// namespaceUsingSecret maps a Secret to its namespace when a policy there
// keeps its storage URL or a key set in it, or when it is an admin Secret:
// the reconcile keeps it while the namespace has policies or injected pods.
func (r *Reconciler) namespaceUsingSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	if slices.Contains(wellknown.AdminSecretNames, obj.GetName()) {
		return watch.NamespaceOf(ctx, obj)
	}
	var list v1alpha1.RateLimitPolicyList
	err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{storageSecretIndex: obj.GetName()}, client.UnsafeDisableDeepCopy)
	if err != nil || len(list.Items) == 0 {
		return nil
	}
	return watch.NamespaceOf(ctx, obj)
}
