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

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/watch"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// SetupWithManager registers the status controller and its poller, which
// enqueues a namespace when its enforcers' answers change. Besides, it
// checks a namespace at once when a policy is created, deleted, changes
// its spec or its Accepted condition, and when a selected pod starts,
// stops, gets its IP or changes labels.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Secrets == nil {
		r.Secrets = mgr.GetAPIReader()
	}
	r.poller = newEnforcerPoller(mgr.GetClient(), r.Secrets, r.httpClient, r.interval(), pollConcurrency)
	r.poller.observe = r.Observe
	if err := mgr.Add(r.poller); err != nil {
		return fmt.Errorf("add the enforcer poller: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("enforcerstatus").
		WatchesRawSource(source.Channel(r.poller.changed, &handler.EnqueueRequestForObject{})).
		Watches(&v1alpha1.RateLimitPolicy{}, handler.EnqueueRequestsFromMapFunc(watch.NamespaceOf),
			builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, acceptedChanged()))).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(watch.NamespaceWithPolicies(r)),
			builder.WithPredicates(predicate.Or(watch.PodCountChanged(), podIPChanged()))).
		Watches(&corev1.ConfigMap{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(configPublished())).
		Complete(r)
}

// RecordPushed takes the /status document a push was answered with as
// the pod's latest answer (delivery.AnswerFunc).
func (r *Reconciler) RecordPushed(ctx context.Context, pod *corev1.Pod, addr string, st *statusdoc.Document) {
	if r.poller != nil {
		r.poller.recordPushed(ctx, pod, addr, st)
	}
}

// acceptedChanged passes policy updates whose Accepted condition changed:
// Ready follows it.
func acceptedChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldP, okOld := e.ObjectOld.(*v1alpha1.RateLimitPolicy)
			newP, okNew := e.ObjectNew.(*v1alpha1.RateLimitPolicy)
			if !okOld || !okNew {
				return true
			}
			a := apimeta.FindStatusCondition(oldP.Status.Conditions, v1alpha1.ConditionAccepted)
			b := apimeta.FindStatusCondition(newP.Status.Conditions, v1alpha1.ConditionAccepted)
			if a == nil || b == nil {
				return a != b
			}
			return a.Status != b.Status || a.Reason != b.Reason || a.ObservedGeneration != b.ObservedGeneration
		},
	}
}

// configPublished passes the namespaces' enforcer ConfigMaps when the
// policy controller publishes another configuration: Reconcile then
// follows the enforcers until they run it (askBehind).
func configPublished() predicate.Predicate {
	hash := func(obj client.Object) string { return obj.GetAnnotations()[wellknown.ConfigHashAnnotation] }
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return e.Object.GetName() == wellknown.ConfigMapName },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectNew.GetName() == wellknown.ConfigMapName && hash(e.ObjectOld) != hash(e.ObjectNew)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// podIPChanged passes the pod updates that change where the status
// controller polls a pod's enforcer.
func podIPChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldPod, okOld := e.ObjectOld.(*corev1.Pod)
			newPod, okNew := e.ObjectNew.(*corev1.Pod)
			return !okOld || !okNew || oldPod.Status.PodIP != newPod.Status.PodIP
		},
	}
}
