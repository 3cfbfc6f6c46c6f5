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

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// The NetworkPolicy the policy controller keeps, when enabled: only its own
// name is ever updated or deleted.
//
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,resourceNames=sluice-enforcer-admin,verbs=update;patch;delete

// NetworkPolicyName is the NetworkPolicy guarding the enforcers' admin port
// in a namespace with policies.
const NetworkPolicyName = "sluice-enforcer-admin"

// EnforcerNetworkPolicy is how the admin port of injected pods is fenced,
// from the manager's flags: a defence in depth behind the /status token.
type EnforcerNetworkPolicy struct {
	// AdminPort is the enforcers' sluice-admin port.
	AdminPort int32
	// ManagerNamespace and ManagerPodLabels select the manager's pods,
	// which poll /status.
	ManagerNamespace string
	ManagerPodLabels map[string]string
	// MetricsNamespaces selects the namespaces whose pods may scrape
	// /metrics (Prometheus); nil: none.
	MetricsNamespaces *metav1.LabelSelector
}

// reconcileNetworkPolicy keeps the namespace's NetworkPolicy, or removes it
// when it must not be there. NetworkPolicies add up, and selecting a pod
// isolates it, so this one allows every other port from anywhere: in a
// namespace that already has Ingress NetworkPolicies of its own it would
// open what those close, and the controller steps back there (the user's
// policies then decide who reaches the admin port, docs/install.md).
func (r *Reconciler) reconcileNetworkPolicy(ctx context.Context, namespace string, policies []*v1alpha1.RateLimitPolicy) error {
	if r.NetworkPolicy == nil {
		return nil
	}
	others, err := r.othersIsolateIngress(ctx, namespace)
	if err != nil {
		return err
	}
	if others != "" {
		logf.FromContext(ctx).V(1).Info("not fencing the enforcers' admin port: the namespace has Ingress NetworkPolicies of its own",
			"namespace", namespace, "networkPolicy", others)
		return r.deleteNetworkPolicy(ctx, namespace)
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: NetworkPolicyName, Namespace: namespace}}
	_, err = controllerutil.CreateOrUpdate(ctx, r.Client, np, func() error {
		if !np.CreationTimestamp.IsZero() && np.Labels[wellknown.ManagedByLabel] != wellknown.ManagedByValue {
			return fmt.Errorf("a NetworkPolicy of that name exists and is not Sluice's: rename it")
		}
		if np.Labels == nil {
			np.Labels = map[string]string{}
		}
		np.Labels[wellknown.ManagedByLabel] = wellknown.ManagedByValue
		np.OwnerReferences = ownerReferences(policies)
		np.Spec = r.NetworkPolicy.spec()
		return nil
	})
	if err != nil {
		return fmt.Errorf("write NetworkPolicy %s/%s: %w", namespace, NetworkPolicyName, err)
	}
	return nil
}

// othersIsolateIngress names a NetworkPolicy of the namespace, not ours,
// that isolates pods for ingress; "" when there is none.
func (r *Reconciler) othersIsolateIngress(ctx context.Context, namespace string) (string, error) {
	var list networkingv1.NetworkPolicyList
	if err := r.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return "", fmt.Errorf("list NetworkPolicies in %s: %w", namespace, err)
	}
	for _, np := range list.Items {
		if np.Name == NetworkPolicyName && np.Labels[wellknown.ManagedByLabel] == wellknown.ManagedByValue {
			continue
		}
		// Without policyTypes, a NetworkPolicy is an Ingress one.
		if len(np.Spec.PolicyTypes) == 0 {
			return np.Name, nil
		}
		for _, t := range np.Spec.PolicyTypes {
			if t == networkingv1.PolicyTypeIngress {
				return np.Name, nil
			}
		}
	}
	return "", nil
}

// deleteNetworkPolicy removes our NetworkPolicy of the namespace, if any.
func (r *Reconciler) deleteNetworkPolicy(ctx context.Context, namespace string) error {
	if r.NetworkPolicy == nil {
		return nil
	}
	np := &networkingv1.NetworkPolicy{}
	err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: NetworkPolicyName}, np)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read NetworkPolicy %s/%s: %w", namespace, NetworkPolicyName, err)
	}
	if np.Labels[wellknown.ManagedByLabel] != wellknown.ManagedByValue {
		return nil // someone else's, of the same name
	}
	if err := r.Delete(ctx, np, client.Preconditions{UID: &np.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete NetworkPolicy %s/%s: %w", namespace, NetworkPolicyName, err)
	}
	return nil
}

// spec selects the injected pods and allows their admin port from the
// manager (and the metrics namespaces), every other TCP port and every UDP
// port from anywhere. The kubelet's probes come from the node, which
// NetworkPolicies always allow.
func (n *EnforcerNetworkPolicy) spec() networkingv1.NetworkPolicySpec {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	portRange := func(proto corev1.Protocol, from, to int32) networkingv1.NetworkPolicyPort {
		p := networkingv1.NetworkPolicyPort{Protocol: &proto, Port: new(intstr.FromInt32(from))}
		if to > from {
			p.EndPort = new(to)
		}
		return p
	}
	var others []networkingv1.NetworkPolicyPort
	if n.AdminPort > 1 {
		others = append(others, portRange(tcp, 1, n.AdminPort-1))
	}
	if n.AdminPort < 65535 {
		others = append(others, portRange(tcp, n.AdminPort+1, 65535))
	}
	others = append(others, portRange(udp, 1, 65535))
	admin := []networkingv1.NetworkPolicyPort{portRange(tcp, n.AdminPort, n.AdminPort)}
	rules := []networkingv1.NetworkPolicyIngressRule{
		{Ports: others},
		{Ports: admin, From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: n.ManagerNamespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: n.ManagerPodLabels},
		}}},
	}
	if n.MetricsNamespaces != nil {
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: admin, From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: n.MetricsNamespaces.DeepCopy(),
		}}})
	}
	return networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{wellknown.EnforcerLabel: wellknown.EnforcerLabelValue}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress:     rules,
	}
}
