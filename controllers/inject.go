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
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/compile"
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
)

// Paths inside the enforcer container. The config and the labels are two
// volumes in two directories: nesting one mount inside the other read-only
// volume fails, and subPath mounts would not see updates.
const (
	configVolumeName     = "sluice-config"
	podInfoVolumeName    = "sluice-podinfo"
	adminTokenVolumeName = "sluice-admin-token"
	configDir            = "/etc/sluice/config"
	podInfoDir           = "/etc/sluice/podinfo"
	adminTokenDir        = "/etc/sluice/admin"
	// noAPITokenVolumeName is an empty directory over the service account
	// token's path: the enforcer never calls the Kubernetes API, and with
	// a mount there the ServiceAccount admission plugin gives it no token.
	noAPITokenVolumeName = "sluice-no-api-token"
	serviceAccountDir    = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// EnforcerSidecar is how the webhook injects the enforcer, from the
// manager's flags.
type EnforcerSidecar struct {
	Image           string
	ImagePullPolicy corev1.PullPolicy
	// HTTPPort and AdminPort are the enforcer's ports in the pod: they must
	// not collide with the application's.
	HTTPPort  int32
	AdminPort int32
	Resources corev1.ResourceRequirements
	// RunAsUser is the enforcer's non-root user.
	RunAsUser int64
	// MaxProcs is the enforcer's GOMAXPROCS, 0 for Go's default (see
	// DefaultEnforcerMaxProcs).
	MaxProcs int
	// DefaultRedisSecret names a Secret key holding the default Redis URL;
	// the Secret must exist in each injected namespace. It wins over
	// DefaultRedisURL.
	DefaultRedisSecret *corev1.SecretKeySelector
	// DefaultRedisURL is the default Redis URL, injected as a plain value:
	// it must not carry a password (see ValidateDefaultRedisURL).
	DefaultRedisURL string
	// ExtraArgs are more enforcer flags (--NAME=VALUE), after the
	// injector's own: the limits an operator tunes.
	ExtraArgs []string
}

// DefaultEnforcerMaxProcs is the injected enforcer's GOMAXPROCS unless the
// operator says otherwise. Left to Go, a sidecar without a CPU limit runs
// as many threads of Go code as the node has CPUs, however little of them
// it gets: with more threads than the CPUs it is given, the enforcer spent
// 14-20% more CPU per request and had longer tails (docs/performance.md,
// "Threads").
const DefaultEnforcerMaxProcs = 2

// MaxEnforcerMaxProcs bounds the operator's choice.
const MaxEnforcerMaxProcs = 256

func (s *EnforcerSidecar) hasDefaultRedis() bool {
	return s.DefaultRedisSecret != nil || s.DefaultRedisURL != ""
}

// injectDecision is whether a pod gets the enforcer, and why.
type injectDecision struct {
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

// injectionDecision decides whether pod gets the enforcer, given the
// policies of its namespace. It is pure: the webhook acts on it and the
// status controller explains, with it, why a selected pod has no enforcer.
func injectionDecision(pod *corev1.Pod, policies []v1alpha1.RateLimitPolicy, sidecar *EnforcerSidecar) injectDecision {
	d := injectDecision{Selected: selectingPolicies(pod, policies)}
	names := policyNames(d.Selected)
	switch {
	case len(d.Selected) == 0:
		d.Reason, d.Message = ReasonNotSelected, "no RateLimitPolicy of the namespace selects the pod"
	case hasEnforcer(pod):
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

// selectingPolicies are the policies, not being deleted, whose selector
// matches the pod's labels. An empty or invalid selector selects nothing,
// as the policy controller reports; so does a policy it refused for its
// upstream port or protocol, which no enforcer applies.
func selectingPolicies(pod *corev1.Pod, policies []v1alpha1.RateLimitPolicy) []*v1alpha1.RateLimitPolicy {
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

// hasEnforcer says whether the pod already runs a container of the
// enforcer's name, as a sidecar or otherwise.
func hasEnforcer(pod *corev1.Pod) bool {
	return enforcerContainer(pod) != nil
}

func enforcerContainer(pod *corev1.Pod) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == wellknown.EnforcerContainerName {
				return &list[i]
			}
		}
	}
	return nil
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
		if v.Name == configVolumeName || v.Name == podInfoVolumeName || v.Name == adminTokenVolumeName {
			return fmt.Sprintf("the pod already has a volume named %s, the name of an enforcer volume", v.Name)
		}
	}
	return ""
}

// needsDefaultRedis returns a selected policy that uses the operator's
// default Redis, nil when all name their own storage.
func needsDefaultRedis(selected []*v1alpha1.RateLimitPolicy) *v1alpha1.RateLimitPolicy {
	for _, p := range selected {
		if p.Spec.Storage == nil {
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

// redisEnv is the enforcer's Redis settings for the selected policies:
// each policy's storage Secret under the variable the compiled config
// names, and the default Redis when some policy uses it. Secret values are
// referenced, never copied into the pod spec.
func redisEnv(selected []*v1alpha1.RateLimitPolicy, sidecar *EnforcerSidecar) []corev1.EnvVar {
	var env []corev1.EnvVar
	if needsDefaultRedis(selected) != nil {
		switch {
		case sidecar.DefaultRedisSecret != nil:
			env = append(env, corev1.EnvVar{Name: wellknown.DefaultRedisURLEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: sidecar.DefaultRedisSecret.DeepCopy()}})
		case sidecar.DefaultRedisURL != "":
			env = append(env, corev1.EnvVar{Name: wellknown.DefaultRedisURLEnv, Value: sidecar.DefaultRedisURL})
		}
	}
	for _, p := range selected {
		if p.Spec.Storage == nil {
			continue
		}
		ref := p.Spec.Storage.SecretRef
		key := ref.Key
		if key == "" {
			key = v1alpha1.DefaultStorageSecretKey
		}
		// Optional: a missing Secret must not keep the application from
		// starting; the policy reports StorageSecretMissing meanwhile.
		env = append(env, corev1.EnvVar{Name: compile.RedisURLEnv(p.Name), ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name},
				Key:                  key,
				Optional:             new(true),
			},
		}})
	}
	return env
}

// ValidateDefaultRedisURL refuses a default Redis URL with a password: the
// webhook would copy it into every injected pod spec. Such a URL belongs in
// a Secret, named with EnforcerSidecar.DefaultRedisSecret.
func ValidateDefaultRedisURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("default Redis URL is not a URL: %w", err)
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		return errors.New("the default Redis URL carries a password, which injection would copy into every pod spec: " +
			"put the URL in a Secret of each injected namespace and name it with --default-redis-secret")
	}
	return nil
}
