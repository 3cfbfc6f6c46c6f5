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

// Package inject decides whether a pod gets the enforcer sidecar, and why,
// and adds the sidecar to a pod. It is pure: the injection webhook acts on
// the decision, the status controller explains with it why a selected pod
// runs no enforcer, and kubectl-sluice can ask it the same question.
package inject

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// Reasons of the injection decision: Event reasons of the webhook, and the
// explanation the status controller gives for a selected pod without an
// enforcer.
const (
	ReasonInjected                     = "Injected"
	ReasonNotSelected                  = "NotSelected"
	ReasonOptedOut                     = "OptedOut"
	ReasonHostNetwork                  = "HostNetwork"
	ReasonAlreadyInjected              = "AlreadyInjected"
	ReasonConflictingUpstreamPorts     = "ConflictingUpstreamPorts"
	ReasonConflictingUpstreamProtocols = "ConflictingUpstreamProtocols"
	ReasonPortInUse                    = "PortInUse"
	ReasonNoDefaultRedis               = "NoDefaultRedis"
	// ReasonNamespaceNotEnabled is the decision for a pod of a namespace
	// without the injection label (DecideInNamespace): the webhook never
	// sees such pods.
	ReasonNamespaceNotEnabled = "NamespaceNotEnabled"
)

// Decision is whether a pod gets the enforcer, and why.
type Decision struct {
	Inject  bool
	Reason  string
	Message string
	// Selected are the policies that select the pod, sorted by name.
	Selected []*v1alpha1.RateLimitPolicy
	// UpstreamPort is the application port of the selected policies.
	UpstreamPort int32
	// UpstreamProtocol is how the selected policies forward to it.
	UpstreamProtocol v1alpha1.UpstreamProtocol
}

// Decide decides whether pod gets the enforcer, given the policies of its
// namespace. It is pure: the webhook acts on it and the status controller
// explains, with it, why a selected pod has no enforcer.
func Decide(pod *corev1.Pod, policies []v1alpha1.RateLimitPolicy, sidecar *EnforcerSidecar) Decision {
	d := Decision{Selected: SelectingPolicies(pod, policies)}
	names := policyNames(d.Selected)
	switch {
	case len(d.Selected) == 0:
		d.Reason, d.Message = ReasonNotSelected, "no RateLimitPolicy of the namespace selects the pod"
	case HasEnforcer(pod):
		d.Reason, d.Message = ReasonAlreadyInjected, "the pod already has a container named "+wellknown.EnforcerContainerName
	case pod.Annotations[wellknown.InjectAnnotation] == "false" || pod.Labels[wellknown.InjectAnnotation] == "false":
		d.Reason = ReasonOptedOut
		d.Message = fmt.Sprintf("the pod opts out with %s: \"false\", so %s %s not enforced on it", wellknown.InjectAnnotation, names, plural(int32(len(d.Selected)), "is", "are"))
	case pod.Spec.HostNetwork:
		d.Reason = ReasonHostNetwork
		d.Message = fmt.Sprintf("the pod uses the host network, where the enforcer's ports would be the node's, so %s %s not enforced on it", names, plural(int32(len(d.Selected)), "is", "are"))
	default:
		d.UpstreamPort, d.Message = upstreamPort(d.Selected)
		if d.UpstreamPort == 0 {
			d.Reason = ReasonConflictingUpstreamPorts
			return d
		}
		d.UpstreamProtocol, d.Message = upstreamProtocol(d.Selected)
		if d.UpstreamProtocol == "" {
			d.Reason = ReasonConflictingUpstreamProtocols
			return d
		}
		if msg := portInUse(pod, sidecar, d.UpstreamPort); msg != "" {
			d.Reason, d.Message = ReasonPortInUse, msg
			return d
		}
		if p := needsDefaultRedis(d.Selected); p != nil && !sidecar.hasDefaultRedis() {
			d.Reason = ReasonNoDefaultRedis
			d.Message = fmt.Sprintf("policy %s has no spec.storage and the operator has no default Redis: set spec.storage, or the manager's --default-redis-url or --default-redis-secret", p.Name)
			return d
		}
		d.Inject, d.Reason = true, ReasonInjected
		d.Message = fmt.Sprintf("injected the enforcer for %s, forwarding to port %d", names, d.UpstreamPort)
		if d.UpstreamProtocol != v1alpha1.DefaultUpstreamProtocol {
			d.Message += " with " + string(d.UpstreamProtocol)
		}
	}
	return d
}

// DecideInNamespace is Decide for a pod of a namespace that is labelled
// for injection or not (injectionEnabled): a pod of a namespace without the
// label, which neither runs an enforcer nor opts out, gets
// ReasonNamespaceNotEnabled, since the webhook never sees it.
func DecideInNamespace(pod *corev1.Pod, policies []v1alpha1.RateLimitPolicy, sidecar *EnforcerSidecar, injectionEnabled bool) Decision {
	d := Decide(pod, policies, sidecar)
	if len(d.Selected) > 0 && !injectionEnabled && !HasEnforcer(pod) && d.Reason != ReasonOptedOut {
		d = Decision{Reason: ReasonNamespaceNotEnabled, Selected: d.Selected}
	}
	return d
}

// SelectingPolicies are the policies, not being deleted, whose selector
// matches the pod's labels. An empty or invalid selector selects nothing,
// as the policy controller reports; so does a policy it refused for its
// upstream port or protocol, which no enforcer applies.
func SelectingPolicies(pod *corev1.Pod, policies []v1alpha1.RateLimitPolicy) []*v1alpha1.RateLimitPolicy {
	var out []*v1alpha1.RateLimitPolicy
	for i := range policies {
		p := &policies[i]
		if !p.DeletionTimestamp.IsZero() || refusedForUpstream(p) || !selects(p, pod) {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *v1alpha1.RateLimitPolicy) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func selects(p *v1alpha1.RateLimitPolicy, pod *corev1.Pod) bool {
	selector, err := metav1.LabelSelectorAsSelector(&p.Spec.Selector)
	return err == nil && !selector.Empty() && selector.Matches(labels.Set(pod.Labels))
}

// HasEnforcer says whether the pod already runs a container of the
// enforcer's name, as a sidecar or otherwise.
func HasEnforcer(pod *corev1.Pod) bool {
	return EnforcerContainer(pod) != nil
}

// EnforcerContainer is the pod's container of the enforcer's name, nil
// when it has none.
func EnforcerContainer(pod *corev1.Pod) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == wellknown.EnforcerContainerName {
				return &list[i]
			}
		}
	}
	return nil
}

// MountsWriteToken says whether the pod's enforcer has the write token
// mounted: pods injected before it was split from the read token have
// the one token, which their enforcer takes for writes too.
func MountsWriteToken(pod *corev1.Pod) bool {
	c := EnforcerContainer(pod)
	if c == nil {
		return false
	}
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == WriteTokenVolumeName })
}

// upstreamPort is the port every selected policy forwards to; 0 with a
// message when they disagree, since one enforcer forwards to one port.
func upstreamPort(selected []*v1alpha1.RateLimitPolicy) (int32, string) {
	port := selected[0].Spec.UpstreamPort
	for _, p := range selected[1:] {
		if p.Spec.UpstreamPort != port {
			return 0, fmt.Sprintf("policies %s (upstreamPort %d) and %s (upstreamPort %d) select the pod with different upstream ports, "+
				"and its one enforcer forwards to one port: give them the same upstreamPort, or selectors that do not overlap",
				selected[0].Name, port, p.Name, p.Spec.UpstreamPort)
		}
	}
	return port, ""
}

// upstreamProtocol is the protocol every selected policy forwards with; ""
// with a message when they disagree, since one enforcer speaks one protocol
// to the application.
func upstreamProtocol(selected []*v1alpha1.RateLimitPolicy) (v1alpha1.UpstreamProtocol, string) {
	protocol := selected[0].Spec.UpstreamProtocolOrDefault()
	for _, p := range selected[1:] {
		if other := p.Spec.UpstreamProtocolOrDefault(); other != protocol {
			return "", fmt.Sprintf("policies %s (upstreamProtocol %s) and %s (upstreamProtocol %s) select the pod with different upstream protocols, "+
				"and its one enforcer forwards with one protocol: give them the same upstreamProtocol (H2C for a gRPC server, HTTP1 otherwise), or selectors that do not overlap",
				selected[0].Name, protocol, p.Name, other)
		}
	}
	return protocol, ""
}

// portInUse says which of the enforcer's ports the pod already uses, or
// why the upstream port cannot be one of them; empty when none is.
func portInUse(pod *corev1.Pod, sidecar *EnforcerSidecar, upstream int32) string {
	ours := map[int32]string{sidecar.HTTPPort: wellknown.HTTPPortName, sidecar.AdminPort: wellknown.AdminPortName}
	if name, ok := ours[upstream]; ok {
		return fmt.Sprintf("the upstream port %d is the enforcer's own %s port: change spec.upstreamPort or the manager's enforcer ports", upstream, name)
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, p := range c.Ports {
				if name, ok := ours[p.ContainerPort]; ok {
					return fmt.Sprintf("container %s already uses port %d, which the enforcer listens on as %s: change the manager's enforcer ports", c.Name, p.ContainerPort, name)
				}
				if p.Name == wellknown.HTTPPortName || p.Name == wellknown.AdminPortName {
					return fmt.Sprintf("container %s already has a port named %s, the name of an enforcer port", c.Name, p.Name)
				}
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == configVolumeName || v.Name == podInfoVolumeName || v.Name == adminTokenVolumeName || v.Name == WriteTokenVolumeName {
			return fmt.Sprintf("the pod already has a volume named %s, the name of an enforcer volume", v.Name)
		}
	}
	return ""
}

// needsDefaultRedis returns a selected policy that uses the operator's
// default Redis, nil when all name their own storage.
func needsDefaultRedis(selected []*v1alpha1.RateLimitPolicy) *v1alpha1.RateLimitPolicy {
	for _, p := range selected {
		if p.Spec.StorageSecret() == nil {
			return p
		}
	}
	return nil
}

// policyNames is "policy a" or "policies a, b".
func policyNames(selected []*v1alpha1.RateLimitPolicy) string {
	names := make([]string, len(selected))
	for i, p := range selected {
		names[i] = p.Name
	}
	if len(names) == 1 {
		return "policy " + names[0]
	}
	return "policies " + strings.Join(names, ", ")
}

// refusedForUpstream says whether the policy controller refused the current
// generation of p for its upstream port or protocol: the webhook then
// injects for the other policies of a pod, as the enforcers apply only
// those.
func refusedForUpstream(p *v1alpha1.RateLimitPolicy) bool {
	c := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionAccepted)
	return c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == p.Generation &&
		(c.Reason == v1alpha1.ReasonConflictingUpstreamPorts || c.Reason == v1alpha1.ReasonConflictingUpstreamProtocols)
}

func plural(n int32, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
