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

package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// The manager's own needs: a Lease for leader election in the namespace it
// runs in, and Events (the recorder falls back to the core API on clusters
// without events.k8s.io/v1).
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=sluice-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// CacheByObject narrows the manager's cache to what the controllers read:
// of all ConfigMaps, only those the policy controller writes.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{wellknown.ManagedByLabel: wellknown.ManagedByValue})},
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
