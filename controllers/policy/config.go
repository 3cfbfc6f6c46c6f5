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
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/conditions"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// reconcileConfig writes the compiled configuration to the namespace's
// ConfigMap. A nil compiled leaves the ConfigMap as it is.
//
// The ConfigMap has no owner: were it owned by the policies, the garbage
// collector would delete it with the last of them, and the enforcers, which
// keep their last good configuration when its file goes, would go on
// enforcing the deleted policies. The manager deletes it itself once the
// namespace has neither policies nor injected pods (reconcileWithoutPolicies).
func (r *Reconciler) reconcileConfig(ctx context.Context, namespace string, policies []*v1alpha1.RateLimitPolicy, compiled *compile.Result) error {
	if compiled == nil {
		return nil
	}
	published, err := r.publishedConfig(ctx, namespace, wellknown.ConfigMapName)
	if err != nil {
		return err
	}
	compiled = revise(compiled, published, r.now())
	op, err := r.writeConfigMap(ctx, namespace, wellknown.ConfigMapName, compiled)
	if op == controllerutil.OperationResultCreated {
		r.announceRecreated(policies)
	}
	if err != nil || r.Delivery == nil {
		return err
	}
	// Pushed once stored: a revision pushed is one no other can take. A
	// push that cannot start leaves the enforcers to their file.
	if err := r.Delivery.Publish(ctx, namespace, compiled.JSON, compiled.Config.Revision); err != nil {
		logf.FromContext(ctx).Error(err, "push the configuration; the enforcers take it from their file", "namespace", namespace)
	}
	return nil
}

// writeConfigMap writes compiled to the namespace's ConfigMap name, taking
// it over when it exists without the manager's label.
func (r *Reconciler) writeConfigMap(ctx context.Context, namespace, name string, compiled *compile.Result) (controllerutil.OperationResult, error) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	mutate := func() error {
		setConfigMap(cm, compiled)
		return nil
	}
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, mutate)
	if apierrors.IsAlreadyExists(err) {
		// It exists without our label, so the cache cannot see it: take it over.
		if err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(cm), cm); err == nil {
			setConfigMap(cm, compiled)
			err = r.Update(ctx, cm)
		}
	}
	if err != nil {
		return op, fmt.Errorf("write ConfigMap %s/%s: %w", namespace, name, err)
	}
	return op, nil
}

// reconcileServiceConfig writes the compiled configuration of the
// namespace's rateLimitService policies to ConfigMap sluice-ratelimit-policies,
// which the rate limit service's pods mount. A nil compiled leaves it as it
// is. Like the enforcers' ConfigMap it has no owner: the service keeps the
// last policy file it loaded when the file goes, so the manager itself
// empties or deletes it once the namespace has no such policy
// (reconcileServiceWithoutPolicies).
func (r *Reconciler) reconcileServiceConfig(ctx context.Context, namespace string, policies []*v1alpha1.RateLimitPolicy, compiled *compile.Result) error {
	if !slices.ContainsFunc(policies, func(p *v1alpha1.RateLimitPolicy) bool { return compile.IsRateLimitService(*p) }) {
		return r.reconcileServiceWithoutPolicies(ctx, namespace)
	}
	if compiled == nil {
		return nil
	}
	_, err := r.writeConfigMap(ctx, namespace, wellknown.ServiceConfigMapName, compiled)
	return err
}

// reconcileServiceWithoutPolicies deletes the service's ConfigMap of a
// namespace without rateLimitService policies once no pod mounts it. While
// pods mount it, an existing one is emptied instead: deleting it would
// leave the service answering with the deleted policies.
func (r *Reconciler) reconcileServiceWithoutPolicies(ctx context.Context, namespace string) error {
	mounting, err := r.podsMounting(ctx, namespace, wellknown.ServiceConfigMapName)
	if err != nil {
		return err
	}
	if mounting == 0 {
		return r.deleteConfigMap(ctx, namespace, wellknown.ServiceConfigMapName)
	}
	cm := &corev1.ConfigMap{}
	err = r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: wellknown.ServiceConfigMapName}, cm)
	if apierrors.IsNotFound(err) {
		return nil // the service reads a missing file as no policies
	}
	if err != nil {
		return fmt.Errorf("read ConfigMap %s/%s: %w", namespace, wellknown.ServiceConfigMapName, err)
	}
	empty, err := compile.Service(namespace, nil, compile.Options{})
	if err != nil {
		return err
	}
	_, err = r.writeConfigMap(ctx, namespace, wellknown.ServiceConfigMapName, empty)
	return err
}

// podsMounting counts the pods of the namespace, running or about to, that
// mount the ConfigMap name as a volume.
func (r *Reconciler) podsMounting(ctx context.Context, namespace, name string) (int, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return 0, fmt.Errorf("list pods in %s: %w", namespace, err)
	}
	n := 0
	for i := range pods.Items {
		if pod := &pods.Items[i]; mountsConfigMap(pod, name) && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n, nil
}

// mountsConfigMap says whether one of the pod's volumes is the ConfigMap name.
func mountsConfigMap(pod *corev1.Pod, name string) bool {
	return slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == name
	})
}

// announceRecreated warns on every policy that was published before, when
// the ConfigMap had to be created again: someone deleted it, and the
// enforcers kept their last good configuration in the meantime.
func (r *Reconciler) announceRecreated(policies []*v1alpha1.RateLimitPolicy) {
	for _, p := range policies {
		if !apimeta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionAccepted) || r.Recorder == nil {
			continue
		}
		conditions.RecordEvent(r.Recorder, p, corev1.EventTypeWarning, v1alpha1.ReasonConfigMapRecreated, conditions.Policy.EventAction, fmt.Sprintf(
			"ConfigMap %s was deleted and has been written again: until the kubelet updates their volume, enforcers keep the last configuration they loaded "+
				"and take no change (their /status says config.fileMissing); the manager owns this ConfigMap, do not delete it", wellknown.ConfigMapName))
	}
}

// setConfigMap makes cm hold compiled, keeping labels and annotations that
// others added.
func setConfigMap(cm *corev1.ConfigMap, compiled *compile.Result) {
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[wellknown.ManagedByLabel] = wellknown.ManagedByValue
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[wellknown.ConfigHashAnnotation] = compiled.Hash
	// One of the two keys, so that a reader never sees two versions.
	if compiled.Compressed != nil {
		cm.Data = map[string]string{}
		cm.BinaryData = map[string][]byte{wellknown.CompressedConfigKey: compiled.Compressed}
	} else {
		cm.Data = map[string]string{wellknown.ConfigKey: string(compiled.JSON)}
		cm.BinaryData = nil
	}
	if compiled.Config.Revision > 0 {
		cm.Data[wellknown.RevisionKey] = strconv.FormatInt(compiled.Config.Revision, 10)
	}
	// Owned by no one (reconcileConfig); earlier releases made every
	// policy an owner, which an upgrade takes off here.
	cm.OwnerReferences = withoutPolicyOwners(cm.OwnerReferences)
}

// withoutPolicyOwners drops the RateLimitPolicy owners of refs, keeping
// any other owner someone added.
func withoutPolicyOwners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	out := slices.DeleteFunc(slices.Clone(refs), func(ref metav1.OwnerReference) bool {
		return ref.Kind == "RateLimitPolicy" && strings.HasPrefix(ref.APIVersion, v1alpha1.GroupVersion.Group+"/")
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// ownerReferences lists every policy as an owner, sorted by name, for the
// objects that go with the last policy (the admin Secret, the
// NetworkPolicy). None is the controller: they belong to them all.
func ownerReferences(policies []*v1alpha1.RateLimitPolicy) []metav1.OwnerReference {
	refs := make([]metav1.OwnerReference, 0, len(policies))
	for _, p := range policies {
		refs = append(refs, metav1.OwnerReference{
			APIVersion: v1alpha1.GroupVersion.String(),
			Kind:       "RateLimitPolicy",
			Name:       p.Name,
			UID:        p.UID,
		})
	}
	slices.SortFunc(refs, func(a, b metav1.OwnerReference) int { return strings.Compare(a.Name, b.Name) })
	return refs
}

// reconcileWithoutPolicies publishes a configuration without policies for
// as long as the namespace has injected pods, whose enforcers then pass
// traffic through, and keeps their admin Secrets, so that they can still
// be asked what they do; it deletes both once no such pod is left.
// Deleting the ConfigMap while enforcers run would leave them enforcing the
// last configuration they loaded, the deleted policies included; deleting
// the Secrets, answering no one.
func (r *Reconciler) reconcileWithoutPolicies(ctx context.Context, namespace string) error {
	injected, err := r.injectedPods(ctx, namespace)
	if err != nil {
		return err
	}
	if injected == 0 {
		if r.Delivery != nil {
			r.Delivery.Forget(namespace)
		}
		return errors.Join(r.deleteConfigMap(ctx, namespace, wellknown.ConfigMapName), r.deleteAdminSecrets(ctx, namespace))
	}
	empty, err := compile.Namespace(namespace, nil, compile.Options{})
	if err != nil {
		return err
	}
	return errors.Join(r.reconcileAdminSecrets(ctx, namespace), r.reconcileConfig(ctx, namespace, nil, empty))
}

// injectedPods counts the pods of the namespace that run an enforcer, or
// will: every one reads the namespace's ConfigMap.
func (r *Reconciler) injectedPods(ctx context.Context, namespace string) (int, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return 0, fmt.Errorf("list pods in %s: %w", namespace, err)
	}
	n := 0
	for i := range pods.Items {
		if pod := &pods.Items[i]; inject.HasEnforcer(pod) && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n, nil
}

// deleteConfigMap removes the namespace's ConfigMap name, once nothing
// reads it.
func (r *Reconciler) deleteConfigMap(ctx context.Context, namespace, name string) error {
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read ConfigMap %s/%s: %w", namespace, name, err)
	}
	err = r.Delete(ctx, cm, client.Preconditions{UID: &cm.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ConfigMap %s/%s: %w", namespace, name, err)
	}
	return nil
}

// publishedConfig reads the configuration the namespace's ConfigMap name
// holds, nil when there is none or it cannot be read (it is then rewritten
// whole).
func (r *Reconciler) publishedConfig(ctx context.Context, namespace, name string) (*config.Config, error) {
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ConfigMap %s/%s: %w", namespace, name, err)
	}
	doc, err := config.DocumentIn(cm.Data, cm.BinaryData, wellknown.ConfigKey)
	if err != nil {
		return nil, nil //nolint:nilerr // an unreadable ConfigMap is replaced, not an error of this pass
	}
	published, err := config.Parse(doc)
	if err != nil {
		return nil, nil //nolint:nilerr // an unreadable ConfigMap is replaced, not an error of this pass
	}
	// An unreadable revision counts as none: the next starts from the clock.
	published.Revision, _ = strconv.ParseInt(cm.Data[wellknown.RevisionKey], 10, 64)
	return published, nil
}

// publishedGeneration is the generation of p in the published configuration.
func publishedGeneration(published *config.Config, p *v1alpha1.RateLimitPolicy) (int64, bool) {
	if entry, ok := published.Entry(p.Name, string(p.UID)); ok {
		return entry.Generation, true
	}
	return 0, false
}

// secretKeys returns the data keys of a Secret, nil when it does not exist.
// It reads the API server: the cache holds Secrets' metadata only.
func (r *Reconciler) secretKeys(ctx context.Context, namespace, name string) ([]string, error) {
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
	}
	keys := slices.Sorted(maps.Keys(secret.Data))
	if keys == nil {
		keys = []string{} // exists, without keys
	}
	return keys, nil
}
