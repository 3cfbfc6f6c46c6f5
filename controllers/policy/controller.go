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

// Package policy is the policy controller: it compiles every
// RateLimitPolicy of a namespace into the enforcer ConfigMap (sidecar
// policies) and the rate limit service's ConfigMap (rateLimitService
// policies), keeps the
// namespace's admin Secret and NetworkPolicy, and sets each policy's
// Accepted, Stalled and Reconciling conditions (conditions.Policy).
package policy

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/conditions"
	"github.com/sluice-dev/sluice/controllers/watch"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// What the policy controller reads and writes: of Secrets it reads the keys
// (to check spec.storage) and the value of a key that a jwtClaim source's
// keys.secretRef names (a JSON Web Key Set, public keys, compiled into the
// enforcers' ConfigMap), and writes only the two admin Secrets, whose names
// bound updates and deletes; pods are only counted.
//
// +kubebuilder:rbac:groups=sluice.dev,resources=ratelimitpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=sluice.dev,resources=ratelimitpolicies/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=secrets,resourceNames=sluice-enforcer-admin;sluice-enforcer-admin-write,verbs=update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// conflictRetry is how soon a namespace is compiled again after a status
// patch met a newer policy: long enough for the cache to catch up.
const conflictRetry = 250 * time.Millisecond

// Reconciler compiles the RateLimitPolicies of a namespace into its
// ConfigMaps sluice-enforcer-config (sidecar policies) and
// sluice-ratelimit-policies (rateLimitService policies) and reports, per policy, whether its
// current generation was accepted. The key it reconciles names that
// ConfigMap: one pass per namespace, however many policies changed.
type Reconciler struct {
	client.Client
	// APIReader reads the Secrets and ConfigMaps that policies name,
	// uncached: the manager only caches Secrets' metadata and its own
	// ConfigMaps.
	APIReader client.Reader
	// Secrets reads the admin Secrets this controller writes: a cache of
	// them (controllers.NewManagedSecretCache). Nil: APIReader.
	Secrets  client.Reader
	Recorder recorder.EventRecorder
	// NetworkPolicy, when set, is kept in each namespace with policies to
	// fence the enforcers' admin port (reconcileNetworkPolicy).
	NetworkPolicy *EnforcerNetworkPolicy
	// DefaultFailureMode applies to policies stored without spec.failureMode.
	DefaultFailureMode v1alpha1.FailureMode
	// Delivery, when set, pushes each configuration published to the
	// namespace's enforcers; without it they take it from their file.
	Delivery Publisher
	// Now is the clock of condition transitions; nil means time.Now.
	Now func() time.Time
}

// Reconcile compiles every policy of the request's namespace, publishes the
// result and patches each policy's status once, in a deferred step.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	policies, err := r.listPolicies(ctx, req.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	patch := conditions.NewPatch(conditions.Policy, policies)
	defer func() {
		conflict, err := patch.Apply(ctx, r.Client, r.Recorder)
		retErr = errors.Join(retErr, err)
		if conflict && retErr == nil {
			result.RequeueAfter = conflictRetry
		}
	}()

	if len(policies) == 0 {
		return ctrl.Result{}, errors.Join(r.reconcileWithoutPolicies(ctx, req.Namespace),
			r.reconcileServiceWithoutPolicies(ctx, req.Namespace), r.deleteNetworkPolicy(ctx, req.Namespace))
	}
	// The Secrets first: pods started from now on mount them.
	secretErr := errors.Join(r.reconcileAdminSecrets(ctx, req.Namespace),
		r.reconcileNetworkPolicy(ctx, req.Namespace, policies))
	compiled, service, outcomes, err := r.compile(ctx, req.Namespace, policies)
	if err != nil {
		return ctrl.Result{}, errors.Join(secretErr, err)
	}
	publishErr := r.reconcileConfig(ctx, req.Namespace, policies, compiled)
	servicePublishErr := r.reconcileServiceConfig(ctx, req.Namespace, policies, service)
	r.reconcileStatus(patch, outcomes, publishErr, servicePublishErr)
	if keySetInConfigMap(policies) {
		result.RequeueAfter = keySetRecheck
	}
	return result, errors.Join(secretErr, publishErr, servicePublishErr)
}

func (r *Reconciler) secrets() client.Reader {
	if r.Secrets != nil {
		return r.Secrets
	}
	return r.APIReader
}

func (r *Reconciler) listPolicies(ctx context.Context, namespace string) ([]*v1alpha1.RateLimitPolicy, error) {
	var list v1alpha1.RateLimitPolicyList
	if err := r.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list RateLimitPolicies in %s: %w", namespace, err)
	}
	policies := make([]*v1alpha1.RateLimitPolicy, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			policies = append(policies, &list.Items[i])
		}
	}
	return policies, nil
}

// compile gathers what compiling needs from the cluster and compiles the
// namespace: its sidecar policies (compile.Namespace) and its
// rateLimitService policies (compile.Service), each against what its
// ConfigMap holds. A configuration too large for a ConfigMap is reported on
// every policy of it that compiled, and not published (its Result is nil).
func (r *Reconciler) compile(ctx context.Context, namespace string, policies []*v1alpha1.RateLimitPolicy) (
	sidecar, service *compile.Result, outcomes map[string]compileOutcome, err error) {
	opts, pods, err := r.compileOptions(ctx, namespace, policies)
	if err != nil {
		return nil, nil, nil, err
	}
	servicePrevious, err := r.publishedConfig(ctx, namespace, wellknown.ServiceConfigMapName)
	if err != nil {
		return nil, nil, nil, err
	}
	// A policy refused for its upstream port or protocol is left out: its
	// pods' enforcers forward as the older policy says and apply that policy
	// only.
	conflicts := upstreamConflicts(policies, pods, func(p *v1alpha1.RateLimitPolicy) bool {
		_, ok := publishedGeneration(opts.Previous, p)
		return ok
	})
	items := make([]v1alpha1.RateLimitPolicy, 0, len(policies))
	for _, p := range policies {
		if conflicts[p.Name] == nil {
			items = append(items, *p)
		}
	}
	sidecar, err = compile.Namespace(namespace, items, opts)
	var tooLarge *compile.TooLargeError
	if err != nil && !errors.As(err, &tooLarge) {
		return nil, nil, nil, err
	}
	serviceOpts := opts
	serviceOpts.Previous = servicePrevious
	service, err = compile.Service(namespace, items, serviceOpts)
	var serviceTooLarge *compile.TooLargeError
	if err != nil && !errors.As(err, &serviceTooLarge) {
		return nil, nil, nil, err
	}
	outcomes = make(map[string]compileOutcome, len(policies))
	for _, p := range policies {
		if conflict := conflicts[p.Name]; conflict != nil {
			outcomes[p.Name] = compileOutcome{Err: conflict}
			continue
		}
		res, previous, large := sidecar, opts.Previous, tooLarge
		if compile.IsRateLimitService(*p) {
			res, previous, large = service, servicePrevious, serviceTooLarge
		}
		o := compileOutcome{Err: res.Errors[p.Name]}
		if o.Err == nil && large != nil {
			o.Err = &compile.PolicyError{Policy: p.Name, Reason: v1alpha1.ReasonConfigTooLarge, Message: large.Error()}
		}
		if o.Err != nil {
			o.KeptGeneration, _ = publishedGeneration(previous, p)
		}
		outcomes[p.Name] = o
	}
	if tooLarge != nil {
		sidecar = nil // keep what is published
	}
	if serviceTooLarge != nil {
		service = nil
	}
	return sidecar, service, outcomes, nil
}

// compileOptions reads the pods each policy selects, the keys of the Secrets
// policies name, and the configuration published so far; it returns the
// namespace's pods too.
func (r *Reconciler) compileOptions(ctx context.Context, namespace string, policies []*v1alpha1.RateLimitPolicy) (compile.Options, []corev1.Pod, error) {
	opts := compile.Options{
		Replicas:           make(map[string]int32, len(policies)),
		Secrets:            map[string][]string{},
		DefaultFailureMode: r.DefaultFailureMode,
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return opts, nil, fmt.Errorf("list pods in %s: %w", namespace, err)
	}
	for _, p := range policies {
		opts.Replicas[p.Name] = countSelected(p, pods.Items)
		ref := p.Spec.StorageSecret()
		if ref == nil {
			continue
		}
		name := ref.Name
		if _, seen := opts.Secrets[name]; seen {
			continue
		}
		keys, err := r.secretKeys(ctx, namespace, name)
		if err != nil {
			return opts, nil, err
		}
		if keys != nil {
			opts.Secrets[name] = keys
		}
	}
	keySets, err := r.readKeySets(ctx, namespace, policies)
	if err != nil {
		return opts, nil, err
	}
	opts.KeySets = keySets
	previous, err := r.publishedConfig(ctx, namespace, wellknown.ConfigMapName)
	if err != nil {
		return opts, nil, err
	}
	opts.Previous = previous
	return opts, pods.Items, nil
}

// countSelected counts the pods the policy selects that run or are about to:
// each runs an enforcer that takes its share of LocalFallback limits.
func countSelected(p *v1alpha1.RateLimitPolicy, pods []corev1.Pod) int32 {
	selector, err := metav1.LabelSelectorAsSelector(&p.Spec.Selector)
	if compile.IsRateLimitService(*p) {
		// The rate limit service's pods of the namespace decide the policy:
		// LocalFallback gives each of them its share.
		selector, err = labels.SelectorFromSet(labels.Set{wellknown.RateLimitServiceLabel: wellknown.RateLimitServiceLabelValue}), nil
	}
	if err != nil || selector.Empty() {
		return 0 // compiling reports the selector
	}
	var n int32
	for i := range pods {
		pod := &pods[i]
		if watch.ActivePod(pod) && selector.Matches(labels.Set(pod.Labels)) {
			n++
		}
	}
	return n
}

// reconcileStatus sets the status of every policy from its outcome; the
// deferred patch saves it and records the Events of transitions.
// A policy's publishing error is that of its ConfigMap.
func (r *Reconciler) reconcileStatus(patch *conditions.Patch, outcomes map[string]compileOutcome, publishErr, servicePublishErr error) {
	now := metav1.NewTime(r.now())
	for _, p := range patch.Policies() {
		o := outcomes[p.Name]
		o.PublishErr = publishErr
		o.DefaultFailureMode = r.DefaultFailureMode
		if compile.IsRateLimitService(*p) {
			o.PublishErr = servicePublishErr
		}
		patch.RecordOnSave(p, setPolicyStatus(p, o, now))
	}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
