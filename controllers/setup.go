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

// Package controllers registers the Sluice controllers and the injection
// webhook with a manager: the policy controller (controllers/policy), the
// status controller (controllers/enforcerstatus) and the webhook
// (controllers/webhook). Only cmd/manager, and the envtest suites that run
// the controllers, import it and its packages.
package controllers

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/delivery"
	"github.com/sluice-dev/sluice/controllers/enforcerstatus"
	"github.com/sluice-dev/sluice/controllers/policy"
	"github.com/sluice-dev/sluice/controllers/webhook"
	"github.com/sluice-dev/sluice/internal/configpush"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// The manager's own needs: a Lease for leader election in the namespace it
// runs in, and Events (the recorder falls back to the core API on clusters
// without events.k8s.io/v1).
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=sluice-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// CacheByObject narrows the manager's cache to what the controllers read:
// of all ConfigMaps, only those the policy controller writes; of pods, the
// fields the controllers read (TrimPod).
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{wellknown.ManagedByLabel: wellknown.ManagedByValue})},
		&corev1.Pod{}:       {Transform: TrimPod},
	}
}

// NewManagedSecretCache starts, with mgr, a cache of the Secrets the policy
// controller writes (labelled ManagedByLabel=ManagedByValue) in namespaces
// (all when empty), and returns its reader. The manager's own cache keeps
// Secrets' metadata only, of every Secret: a label selector there would
// hide the storage Secrets policies name, so these have a cache of their
// own, which holds no Secret of users.
func NewManagedSecretCache(ctx context.Context, mgr ctrl.Manager, namespaces []string) (client.Reader, error) {
	opts := cache.Options{
		HTTPClient:           mgr.GetHTTPClient(),
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{wellknown.ManagedByLabel: wellknown.ManagedByValue}),
		DefaultTransform:     cache.TransformStripManagedFields(),
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("create the cache of managed Secrets: %w", err)
	}
	// Known before the manager starts, so that it is synced with the caches.
	if _, err := c.GetInformer(ctx, &corev1.Secret{}); err != nil {
		return nil, fmt.Errorf("watch managed Secrets: %w", err)
	}
	if err := mgr.Add(managedSecretCache{c}); err != nil {
		return nil, err
	}
	return c, nil
}

// managedSecretCache makes the manager start the cache with its own
// caches, before any controller reads it.
type managedSecretCache struct{ cache.Cache }

func (c managedSecretCache) GetCache() cache.Cache { return c.Cache }

// Defaults are the operator-wide settings that apply where a policy says
// nothing, set by the manager's flags.
type Defaults struct {
	// RedisURL is the Redis of policies without spec.storage. It goes into
	// pod specs as a plain value, so it carries no password.
	RedisURL string
	// RedisSecret names the Secret key, in each injected pod's namespace,
	// holding the Redis URL of policies without spec.storage. It wins over
	// RedisURL.
	RedisSecret *corev1.SecretKeySelector
	// EnforcerImage is the image of the injected enforcer sidecar.
	EnforcerImage string
	// FailureMode applies to policies stored without spec.failureMode.
	FailureMode v1alpha1.FailureMode
}

// Options are the settings of the controllers and the webhook, from the
// manager's flags.
type Options struct {
	// Namespaces are the namespaces the manager watches; all when empty.
	Namespaces []string
	// Concurrency is how many namespaces the policy controller compiles at
	// once.
	Concurrency int
	// DefaultFailureMode applies to policies stored without spec.failureMode.
	DefaultFailureMode v1alpha1.FailureMode
	// NetworkPolicy, when set, is kept in each namespace with policies to
	// fence the enforcers' admin port.
	NetworkPolicy *policy.EnforcerNetworkPolicy
	// Sidecar is what the webhook injects, and what the status controller
	// explains pods without an enforcer with. Without an image, the webhook
	// is not served.
	Sidecar inject.EnforcerSidecar
	// StatusInterval is how often the enforcers are polled, StatusTimeout
	// how long one /status may take (0: the defaults of enforcerstatus).
	StatusInterval, StatusTimeout time.Duration
	// PushWorkers is how many configuration pushes are in flight at once
	// (0: delivery.DefaultWorkers).
	PushWorkers int
	// Webhook is how the injection webhook is served.
	Webhook WebhookOptions
}

// WebhookOptions are the injection webhook's settings.
type WebhookOptions struct {
	// ConfigurationName is the MutatingWebhookConfiguration whose
	// failurePolicy and timeoutSeconds the manager keeps.
	ConfigurationName string
	FailurePolicy     admissionregistrationv1.FailurePolicyType
	TimeoutSeconds    int32
	Certificates      webhook.Certificates
}

// Setup registers with mgr the policy controller, the status controller
// and, when there is an enforcer image to inject, the injection webhook
// and the controller of its settings. It returns the webhook's readiness
// check, nil when the webhook is not served.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) (healthz.Checker, error) {
	secrets, err := NewManagedSecretCache(ctx, mgr, opts.Namespaces)
	if err != nil {
		return nil, err
	}
	status := &enforcerstatus.Reconciler{
		Client:      mgr.GetClient(),
		Secrets:     secrets,
		Recorder:    mgr.GetEventRecorder("sluice-status-controller"),
		Interval:    opts.StatusInterval,
		PollTimeout: opts.StatusTimeout,
		Sidecar:     opts.Sidecar,
	}
	// Pushes answered turn the status at once; polls found behind are pushed to again.
	pusher := &delivery.Pusher{Pods: mgr.GetClient(), Secrets: secrets, Client: &configpush.Client{}, Workers: opts.PushWorkers,
		OnAnswer: status.RecordPushed}
	status.Observe = pusher.Observed
	if err := mgr.Add(pusher); err != nil {
		return nil, fmt.Errorf("add the configuration pusher: %w", err)
	}
	policies := &policy.Reconciler{
		Client:             mgr.GetClient(),
		APIReader:          mgr.GetAPIReader(),
		Secrets:            secrets,
		Recorder:           mgr.GetEventRecorder("sluice-policy-controller"),
		NetworkPolicy:      opts.NetworkPolicy,
		DefaultFailureMode: opts.DefaultFailureMode,
		Delivery:           pusher,
	}
	if err := policies.SetupWithManager(ctx, mgr, opts.Concurrency); err != nil {
		return nil, fmt.Errorf("set up the policy controller: %w", err)
	}
	if err := status.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up the status controller: %w", err)
	}
	if opts.Sidecar.Image == "" {
		ctrl.Log.WithName("setup").Info("no --enforcer-image: the injection webhook is not served, and pods are created without the enforcer")
		return nil, nil
	}
	settings := &webhook.ConfigurationReconciler{
		Client:            mgr.GetClient(),
		ConfigurationName: opts.Webhook.ConfigurationName,
		FailurePolicy:     opts.Webhook.FailurePolicy,
		TimeoutSeconds:    opts.Webhook.TimeoutSeconds,
	}
	if err := settings.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up the webhook settings: %w", err)
	}
	injector := &webhook.PodInjector{
		Reader:     mgr.GetClient(),
		Recorder:   mgr.GetEventRecorder("sluice-injector"),
		Sidecar:    opts.Sidecar,
		FailClosed: opts.Webhook.FailurePolicy == admissionregistrationv1.Fail,
	}
	return webhook.SetupInjector(mgr, injector, opts.Webhook.Certificates)
}
