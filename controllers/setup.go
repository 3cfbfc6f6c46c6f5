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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
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
		&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{ManagedByLabel: ManagedByValue})},
	}
}

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
