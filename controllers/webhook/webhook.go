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

// Package webhook is the pod injection webhook: it asks internal/inject
// whether each new pod gets the enforcer, adds it, and reports the decision
// as Events on the policies that select the pod. It keeps its own
// certificate and its settings in the webhook configuration.
package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/conditions"
	"github.com/sluice-dev/sluice/internal/inject"
)

// The webhook configuration: pod CREATE in namespaces labelled
// sluice.dev/injection=enabled, except pods labelled sluice.dev/inject=false.
// The manager sets failurePolicy and timeoutSeconds from its flags; these
// are the values until it does. Events are its only side effect, and it
// records none for dry-run requests.
//
// +kubebuilder:webhookconfiguration:mutating=true,name=sluice-injector
// +kubebuilder:webhook:path=/inject-v1-pod,mutating=true,failurePolicy=ignore,sideEffects=NoneOnDryRun,timeoutSeconds=5,groups="",resources=pods,verbs=create,versions=v1,name=inject.sluice.dev,admissionReviewVersions=v1,reinvocationPolicy=Never,serviceName=sluice-webhook-service,serviceNamespace=sluice-system,patch=`{"namespaceSelector":{"matchLabels":{"sluice.dev/injection":"enabled"}},"objectSelector":{"matchExpressions":[{"key":"sluice.dev/inject","operator":"NotIn","values":["false"]}]}}`
//
// +kubebuilder:rbac:groups=sluice.dev,resources=ratelimitpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

const (
	// InjectionPath is where the manager serves the webhook.
	InjectionPath = "/inject-v1-pod"
)

// injectEventAction is the action of the webhook's Events.
const injectEventAction = "Inject"

// PodInjector is the mutating webhook: it adds the enforcer to each new pod
// that a policy of its namespace selects, and reports every decision about
// a selected pod as an Event.
//
// A pod under admission has no UID, and often no name yet (generateName),
// so its Events cannot be attached to it: they go to each policy that
// selects it, where kubectl describe rlp shows them. Pods that no policy
// selects get no Event, as there is no policy to tell and they are most
// pods of an enabled namespace.
type PodInjector struct {
	// Reader lists the policies of the pod's namespace (the manager cache).
	Reader   client.Reader
	Recorder recorder.EventRecorder
	Sidecar  inject.EnforcerSidecar
	// FailClosed refuses a pod when the policies cannot be read, matching
	// failurePolicy Fail; otherwise such a pod is admitted as it is.
	FailClosed bool
}

var _ admission.Defaulter[*corev1.Pod] = &PodInjector{}

// SetupWithManager registers the webhook on the manager's webhook server.
func (i *PodInjector) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &corev1.Pod{}).
		WithDefaulter(i).
		WithDefaulterCustomPath(InjectionPath).
		Complete()
}

// Default injects the enforcer into pod when the decision says so.
func (i *PodInjector) Default(ctx context.Context, pod *corev1.Pod) error {
	log := logf.FromContext(ctx)
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return err
	}
	namespace := pod.Namespace
	if namespace == "" {
		namespace = req.Namespace
	}
	var policies v1alpha1.RateLimitPolicyList
	if err := i.Reader.List(ctx, &policies, client.InNamespace(namespace)); err != nil {
		log.Error(err, "cannot read the policies: the pod is admitted without the enforcer", "namespace", namespace)
		if i.FailClosed {
			return fmt.Errorf("sluice cannot read the RateLimitPolicies of namespace %s: %w", namespace, err)
		}
		return nil
	}
	d := inject.Decide(pod, policies.Items, &i.Sidecar)
	if d.Inject {
		inject.Apply(pod, d, &i.Sidecar)
	}
	log.V(1).Info("injection decision", "namespace", namespace, "pod", podDisplayName(pod), "reason", d.Reason, "message", d.Message)
	if req.DryRun == nil || !*req.DryRun {
		i.record(pod, d)
	}
	return nil
}

// record reports d on every policy that selects the pod.
func (i *PodInjector) record(pod *corev1.Pod, d inject.Decision) {
	if i.Recorder == nil || len(d.Selected) == 0 {
		return
	}
	eventType := corev1.EventTypeWarning
	if d.Reason == inject.ReasonInjected || d.Reason == inject.ReasonAlreadyInjected {
		eventType = corev1.EventTypeNormal
	}
	note := fmt.Sprintf("pod %s: %s", podDisplayName(pod), d.Message)
	for _, p := range d.Selected {
		conditions.RecordEventAbout(i.Recorder, p, podReference(pod, p.Namespace), eventType, d.Reason, injectEventAction, note)
	}
}

// podReference is the pod under admission as the related object of its
// Events: by name when it has one (it has no UID yet), by generateName
// otherwise, so that pods of one owner share a series.
func podReference(pod *corev1.Pod, namespace string) *corev1.ObjectReference {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: namespace, Name: name}
}

// podDisplayName names a pod under admission: its name, or its
// generateName and owner when the API server has not named it yet.
func podDisplayName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	name := pod.GenerateName + "*"
	if owner := metav1.GetControllerOf(pod); owner != nil {
		name += fmt.Sprintf(" of %s %s", owner.Kind, owner.Name)
	}
	return name
}
