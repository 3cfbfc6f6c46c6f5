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

// Package enforcerstatus is the status controller: a poller reads the
// /status of the enforcers of the pods policies select, and of the rate
// limit service's pods for the policies with spec.rateLimitService, and
// the reconciler writes each policy's enforcer counts, decision totals,
// bans, effective limits and its Ready and Throttled conditions
// (conditions.EnforcerStatus).
package enforcerstatus

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/conditions"
	"github.com/sluice-dev/sluice/controllers/watch"
	"github.com/sluice-dev/sluice/enforcer/config"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// What the status controller reads and writes: it polls the enforcers of
// the pods policies select and applies the status fields it owns.
//
// +kubebuilder:rbac:groups=sluice.dev,resources=ratelimitpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=sluice.dev,resources=ratelimitpolicies/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

const (
	// DefaultInterval is how often enforcers are polled.
	DefaultInterval = 10 * time.Second
	// DefaultTimeout bounds one /status request.
	DefaultTimeout = time.Second
	// statusConflictRetry is how soon a namespace is checked again after
	// a patch met a policy that changed since it was read.
	statusConflictRetry = 250 * time.Millisecond
	// pollConcurrency is how many enforcers one pass polls at once.
	pollConcurrency = 16
)

// Reconciler collects, per namespace, the /status of the enforcers in the
// pods that policies select, and writes each policy's enforcer counts,
// decision totals and Ready condition. It runs apart from
// the policy controller: compiling changes with specs, this with pods, and
// it polls on an interval.
type Reconciler struct {
	client.Client
	// Secrets reads the namespaces' admin Secrets, whose token /status
	// requires: a cache of them (controllers.NewManagedSecretCache). Nil: the API
	// server, uncached (never the manager's cache, which would then hold
	// every Secret of the cluster).
	Secrets  client.Reader
	Recorder recorder.EventRecorder
	// HTTPClient polls the enforcers; its Timeout bounds each request
	// (nil: a client with PollTimeout).
	HTTPClient *http.Client
	clientOnce sync.Once
	// PollTimeout bounds one /status request (0: DefaultTimeout).
	PollTimeout time.Duration
	// Interval between two polls of a namespace (0: DefaultInterval).
	Interval time.Duration
	// Sidecar is what the webhook injects, to explain pods without an
	// enforcer with the webhook's own decision.
	Sidecar inject.EnforcerSidecar
	// Now is the clock of condition transitions; nil means time.Now.
	Now func() time.Time
	// Observe, when set, is told every /status polled (delivery.Pusher's
	// Observed).
	Observe func(*corev1.Pod, *statusdoc.Document)
	// history is what each namespace's configurations held for its policies.
	history configHistory
	// poller polls the enforcers outside Reconcile (SetupWithManager adds it).
	poller *enforcerPoller
}

// Reconcile reads the latest /status of the enforcers of the namespace's
// selected pods, which the poller keeps, and patches the status of each
// of its policies once. It never waits on the network.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var list v1alpha1.RateLimitPolicyList
	if err := r.List(ctx, &list, client.InNamespace(req.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list RateLimitPolicies in %s: %w", req.Namespace, err)
	}
	policies := make([]*v1alpha1.RateLimitPolicy, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			policies = append(policies, &list.Items[i])
		}
	}
	if len(policies) == 0 {
		r.history.forget(req.Namespace)
		return ctrl.Result{}, nil
	}
	pods, waiting, err := r.collectPods(ctx, req.Namespace, list.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	history, err := r.publishedConfigs(ctx, req.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	if waiting {
		// The poller was asked for the pods it holds no answer for and
		// enqueues the namespace when they answered; writing now would
		// report them as unknown for a moment. The requeue is a backstop.
		return ctrl.Result{RequeueAfter: r.interval()}, nil
	}
	patch := conditions.NewPatch(conditions.EnforcerStatus, policies)
	r.reconcileStatus(patch, pods, history)
	conflict, err := patch.Apply(ctx, r.Client, r.Recorder)
	if err != nil {
		return ctrl.Result{}, err
	}
	if conflict {
		return ctrl.Result{RequeueAfter: statusConflictRetry}, nil
	}
	return ctrl.Result{}, nil // the poller enqueues the namespace when its enforcers' answers change
}

// publishedConfigs records the configuration the policy controller
// published for the namespace and returns the ones seen, the published
// one last; none when nothing is published yet.
func (r *Reconciler) publishedConfigs(ctx context.Context, namespace string) ([]seenConfig, error) {
	var cm corev1.ConfigMap
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: wellknown.ConfigMapName}, &cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get ConfigMap %s/%s: %w", namespace, wellknown.ConfigMapName, err)
	}
	// Unreadable, it names no policy: the hash still tells enforcers apart.
	doc, _ := config.DocumentIn(cm.Data, cm.BinaryData, wellknown.ConfigKey)
	return r.history.observe(namespace, cm.Annotations[wellknown.ConfigHashAnnotation], string(doc)), nil
}

// collectPods finds the active pods that some policy selects, with the
// webhook's decision for each and its enforcer's latest /status, and the
// rate limit service's pods when some policy is one of the service, with
// their latest /status. waiting is set when the poller has no answer yet
// for some injected or service pod: it was asked for one.
func (r *Reconciler) collectPods(ctx context.Context, namespace string, policies []v1alpha1.RateLimitPolicy) (selected []selectedPod, waiting bool, err error) {
	var podList corev1.PodList
	if err := r.List(ctx, &podList, client.InNamespace(namespace)); err != nil {
		return nil, false, fmt.Errorf("list pods in %s: %w", namespace, err)
	}
	// Sorted, so that messages name pods in a stable order and a pass that
	// finds nothing new writes nothing.
	slices.SortFunc(podList.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	enabled, err := r.injectionEnabled(ctx, namespace)
	if err != nil {
		return nil, false, err
	}
	servicePolicies := hasRateLimitServicePolicy(policies)
	for i := range podList.Items {
		pod := &podList.Items[i]
		if !watch.ActivePod(pod) {
			continue
		}
		if servicePolicies && isRateLimitServicePod(pod) {
			sp := selectedPod{Pod: pod, Service: true}
			var ok bool
			if sp.Polled, ok = r.poller.polled(pod); !ok {
				r.poller.ask(pod)
				waiting = true
			}
			selected = append(selected, sp)
		}
		d := inject.DecideInNamespace(pod, policies, &r.Sidecar, enabled)
		if len(d.Selected) == 0 {
			continue
		}
		sp := selectedPod{Pod: pod, Decision: d}
		if inject.HasEnforcer(pod) {
			var ok bool
			if sp.Polled, ok = r.poller.polled(pod); !ok {
				r.poller.ask(pod)
				waiting = true
			}
		}
		selected = append(selected, sp)
	}
	return selected, waiting, nil
}

func (r *Reconciler) injectionEnabled(ctx context.Context, namespace string) (bool, error) {
	var ns corev1.Namespace
	err := r.Get(ctx, types.NamespacedName{Name: namespace}, &ns)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read namespace %s: %w", namespace, err)
	}
	return ns.Labels[wellknown.InjectionNamespaceLabel] == wellknown.InjectionEnabled, nil
}

// podsSelectedBy keeps the pods whose decision lists p among the selecting
// policies; for a policy of the rate limit service, the service's pods.
func podsSelectedBy(p *v1alpha1.RateLimitPolicy, pods []selectedPod) []selectedPod {
	var out []selectedPod
	service := compile.IsRateLimitService(*p)
	for _, sp := range pods {
		if sp.Service || service {
			if sp.Service && service {
				out = append(out, sp)
			}
			continue
		}
		for _, s := range sp.Decision.Selected {
			if s.UID == p.UID && s.Name == p.Name {
				out = append(out, sp)
				break
			}
		}
	}
	return out
}

// reconcileStatus sets the enforcer status of every policy from the pods
// it selects; the deferred patch saves it and records the Events of Ready
// transitions.
func (r *Reconciler) reconcileStatus(patch *conditions.Patch, pods []selectedPod, history []seenConfig) {
	now := metav1.NewTime(r.now())
	for _, p := range patch.Policies() {
		selected := podsSelectedBy(p, pods)
		published := entriesFor(history, string(p.UID))
		if compile.IsRateLimitService(*p) {
			// ConfigMap sluice-enforcer-config holds no entry of it.
			published = publishedEntries{}
		}
		patch.RecordOnSave(p, setEnforcerStatus(p, selected, published, now))
		patch.RecordOnSave(p, setAdaptiveStatus(p, selected, now))
	}
}

func (r *Reconciler) interval() time.Duration {
	if r.Interval > 0 {
		return r.Interval
	}
	return DefaultInterval
}

// httpClient is HTTPClient, or once made, the default: pod IPs reached
// directly whatever HTTP_PROXY says, one idle connection per enforcer.
func (r *Reconciler) httpClient() *http.Client {
	r.clientOnce.Do(func() {
		if r.HTTPClient == nil {
			transport := http.DefaultTransport.(*http.Transport).Clone()
			transport.Proxy = nil
			transport.MaxIdleConnsPerHost = 1
			r.HTTPClient = &http.Client{Timeout: r.pollTimeout(), Transport: transport}
		}
	})
	return r.HTTPClient
}

func (r *Reconciler) pollTimeout() time.Duration {
	if r.PollTimeout > 0 {
		return r.PollTimeout
	}
	return DefaultTimeout
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
