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

package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/sluice-dev/sluice/internal/wellknown"
)

// ConfigurationReconciler keeps the injection webhook's failurePolicy
// and timeoutSeconds as the manager's flags say, whatever the applied
// manifest holds: the settings follow the operator's configuration (Helm
// values) rather than a copy of the webhook configuration.
type ConfigurationReconciler struct {
	client.Client
	// ConfigurationName is the MutatingWebhookConfiguration
	// (InjectionWebhookConfigurationName when empty).
	ConfigurationName string
	FailurePolicy     admissionregistrationv1.FailurePolicyType
	TimeoutSeconds    int32
}

// SetupWithManager watches the webhook configuration.
func (r *ConfigurationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.ConfigurationName == "" {
		r.ConfigurationName = wellknown.InjectionWebhookConfigurationName
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("injectionwebhook").
		For(&admissionregistrationv1.MutatingWebhookConfiguration{}, builder.WithPredicates(
			predicate.NewPredicateFuncs(func(obj client.Object) bool { return obj.GetName() == r.ConfigurationName }))).
		Complete(r)
}

// Reconcile patches failurePolicy and timeoutSeconds of the injection
// webhook when they differ. The strategic merge patch addresses the webhook
// by name and leaves its caBundle and selectors alone.
func (r *ConfigurationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := r.Get(ctx, req.NamespacedName, &cfg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	for _, wh := range cfg.Webhooks {
		if wh.Name != wellknown.InjectionWebhookName {
			continue
		}
		if wh.FailurePolicy != nil && *wh.FailurePolicy == r.FailurePolicy &&
			wh.TimeoutSeconds != nil && *wh.TimeoutSeconds == r.TimeoutSeconds {
			return ctrl.Result{}, nil
		}
		patch, err := json.Marshal(map[string]any{"webhooks": []map[string]any{{
			"name": wellknown.InjectionWebhookName, "failurePolicy": r.FailurePolicy, "timeoutSeconds": r.TimeoutSeconds,
		}}})
		if err != nil {
			return ctrl.Result{}, err
		}
		err = r.Patch(ctx, &cfg, client.RawPatch(types.StrategicMergePatchType, patch))
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("set failurePolicy and timeoutSeconds of webhook %s: %w", wellknown.InjectionWebhookName, err)
		}
		ctrl.LoggerFrom(ctx).Info("set the injection webhook's failure policy", "failurePolicy", r.FailurePolicy, "timeoutSeconds", r.TimeoutSeconds)
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, nil
}
