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

package enforcerstatus

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/conditions"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// readyCondition is Ready for the check: True only when every selected pod
// runs an enforcer that has loaded the current generation and reaches
// Redis. Otherwise the message lists every problem found, the reason is
// the one that most needs the user: pods without a working enforcer, then
// stale enforcers, then enforcers in their failure mode.
func readyCondition(p *v1alpha1.RateLimitPolicy, c enforcerCheck) metav1.Condition {
	accepted := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionAccepted)
	switch {
	case accepted == nil || accepted.ObservedGeneration != p.Generation:
		return notCompiledReady(p.Generation)
	case accepted.Status == metav1.ConditionFalse:
		return notAcceptedReady(p.Generation)
	}
	if c.counts.Selected == 0 && c.service {
		return noServicePodReady(p)
	}
	if c.counts.Selected == 0 {
		cond := noPodsReady(p.Generation)
		if len(c.optedOut) > 0 {
			cond.Message = fmt.Sprintf("%s; no other running pod matches spec.selector", optedOutNote(c.optedOut))
		}
		return cond
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: p.Generation, Status: metav1.ConditionFalse}
	var problems []string
	setReason := func(reason string) {
		if cond.Reason == "" {
			cond.Reason = reason
		}
	}
	if msg := notInjectedMessage(c); msg != "" {
		setReason(v1alpha1.ReasonEnforcersNotReady)
		problems = append(problems, msg)
	}
	for _, sp := range c.unreachable {
		setReason(v1alpha1.ReasonEnforcersNotReady)
		switch {
		case sp.Polled.Address == "":
			problems = append(problems, fmt.Sprintf("pod %s %s", sp.Pod.Name, sp.Polled.Err))
		case sp.Polled.Refused:
			problems = append(problems, fmt.Sprintf("pod %s: %s (on %s); the %s reads the token of Secret %s as the kubelet updates its volume, "+
				"within a minute or two: restart a pod that keeps refusing", sp.Pod.Name, sp.Polled.Err, sp.Polled.Address, c.runner(), wellknown.AdminSecretName))
		default:
			problems = append(problems, fmt.Sprintf("%s on pod %s does not answer on %s: %s", c.runner(), sp.Pod.Name, sp.Polled.Address, sp.Polled.Err))
		}
	}
	for _, sp := range c.notReady {
		setReason(v1alpha1.ReasonEnforcersNotReady)
		problems = append(problems, fmt.Sprintf("%s on pod %s is not ready", c.runner(), sp.Pod.Name))
	}
	if msg := staleMessage(p, c); msg != "" {
		setReason(v1alpha1.ReasonEnforcersStale)
		problems = append(problems, msg)
	}
	if len(c.outdated) > 0 {
		setReason(v1alpha1.ReasonEnforcersStale)
		problems = append(problems, fmt.Sprintf("%s %s not loaded this policy's latest entry of %s yet, with its LocalFallback share for the current pod count (the kubelet refreshes ConfigMap volumes within about a minute)",
			podNames(c.outdated), plural(int32(len(c.outdated)), "has", "have"), wellknown.ConfigMapName))
	}
	if msg := restartMessage(p, c.restart); msg != "" {
		setReason(v1alpha1.ReasonRestartRequired)
		problems = append(problems, msg)
	}
	if msg := degradedMessage(c.runner(), c.degraded); msg != "" {
		setReason(v1alpha1.ReasonDegraded)
		problems = append(problems, msg)
	}
	if msg := overloadedMessage(c.runner(), c.overloaded); msg != "" {
		setReason(v1alpha1.ReasonOverloaded)
		problems = append(problems, msg)
	}
	if len(problems) == 0 {
		cond.Status = metav1.ConditionTrue
		cond.Reason = v1alpha1.ReasonEnforcersReady
		runs := plural(c.counts.Selected, "enforcer runs", "enforcers run")
		if c.service {
			runs = plural(c.counts.Selected, "rate limit service pod runs", "rate limit service pods run")
		}
		cond.Message = fmt.Sprintf("%d of %d %s generation %d and %s Redis", c.counts.UpToDate, c.counts.Selected,
			runs, p.Generation, plural(c.counts.Selected, "reaches", "reach"))
		if len(c.optedOut) > 0 {
			cond.Message += "; " + optedOutNote(c.optedOut)
		}
		return cond
	}
	if len(c.optedOut) > 0 {
		problems = append(capped(problems, 2*podsNamedInMessage), optedOutNote(c.optedOut))
	}
	cond.Message = limitMessage(strings.Join(capped(problems, 2*podsNamedInMessage+1), "; "))
	return cond
}

// runner names what applies the policy in a pod: its enforcer, or for a
// policy of the rate limit service, the service.
func (c enforcerCheck) runner() string {
	if c.service {
		return "rate limit service"
	}
	return "enforcer"
}

// noServicePodReady is Ready for a policy of the rate limit service while
// no pod of the service runs in its namespace: nothing answers Envoy's
// calls for its domain with it.
func noServicePodReady(p *v1alpha1.RateLimitPolicy) metav1.Condition {
	return metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: p.Generation,
		Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonEnforcersNotReady,
		Message: fmt.Sprintf("no rate limit service pod runs in namespace %s (none is labelled %s=%s), so nothing applies domain %s: "+
			"install the chart's rateLimitService (rateLimitService.enabled=true) in this namespace",
			p.Namespace, wellknown.RateLimitServiceLabel, wellknown.RateLimitServiceLabelValue, p.Spec.RateLimitService.Domain)}
}

// notInjectedMessage explains the selected pods without an enforcer,
// grouped by what the user can do about them.
func notInjectedMessage(c enforcerCheck) string {
	if len(c.notInjected) == 0 {
		return ""
	}
	var parts []string
	var restart []selectedPod
	var disabled []selectedPod
	for _, sp := range c.notInjected {
		switch sp.Decision.Reason {
		case inject.ReasonInjected:
			restart = append(restart, sp)
		case inject.ReasonNamespaceNotEnabled:
			disabled = append(disabled, sp)
		default:
			parts = append(parts, fmt.Sprintf("pod %s is not injected (%s): %s", sp.Pod.Name, sp.Decision.Reason, sp.Decision.Message))
		}
	}
	n, selected := int32(len(c.notInjected)), c.counts.Selected
	head := fmt.Sprintf("%d of %d selected %s no enforcer", n, selected, plural(n, "pods has", "pods have"))
	if len(disabled) > 0 {
		parts = append([]string{fmt.Sprintf("namespace %s is not labelled %s=%s: label it, then %s",
			disabled[0].Pod.Namespace, wellknown.InjectionNamespaceLabel, wellknown.InjectionEnabled, recreateAdvice(disabled))}, parts...)
	}
	if len(restart) > 0 {
		parts = append([]string{fmt.Sprintf("%s %s the policy or %s created while the injection webhook was unavailable: %s",
			podNames(restart), plural(int32(len(restart)), "predates", "predate"), plural(int32(len(restart)), "was", "were"), recreateAdvice(restart))}, parts...)
	}
	return head + ": " + strings.Join(capped(parts, podsNamedInMessage), "; ")
}

// notAcceptedReady is Ready for a generation the policy controller did
// not accept.
func notAcceptedReady(generation int64) metav1.Condition {
	return metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: generation,
		Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNotAccepted,
		Message: fmt.Sprintf("generation %d was not accepted: see the Accepted condition for what to change", generation)}
}

// noPodsReady is Ready for a policy no running pod matches.
func noPodsReady(generation int64) metav1.Condition {
	return metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: generation,
		Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonNoPodsSelected,
		Message: "no running pod matches spec.selector; the enforcers of matching pods apply this generation as they start"}
}

// notCompiledReady is Ready while the policy controller has not compiled
// the generation yet: whether it will be accepted is not known.
func notCompiledReady(generation int64) metav1.Condition {
	return metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: generation,
		Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonProgressing,
		Message: fmt.Sprintf("generation %d is not compiled yet; Ready follows once the Accepted condition reports it", generation)}
}

// optedOutNote says which selected pods opt out of injection: the policy
// is not enforced on them, by the user's choice.
func optedOutNote(pods []selectedPod) string {
	return fmt.Sprintf("%s %s out with %s=false and %s not limited", podNames(pods),
		plural(int32(len(pods)), "opts", "opt"), wellknown.InjectAnnotation, plural(int32(len(pods)), "is", "are"))
}

func staleMessage(p *v1alpha1.RateLimitPolicy, c enforcerCheck) string {
	var parts []string
	var reloadErrors []string
	older := 0
	var olderPods []selectedPod
	for _, sp := range c.stale {
		if e := sp.Polled.Status.Config.LastReloadError; e != "" {
			reloadErrors = append(reloadErrors, fmt.Sprintf("%s on pod %s refused the latest configuration: %s", c.runner(), sp.Pod.Name, e))
			continue
		}
		older++
		olderPods = append(olderPods, sp)
	}
	if older > 0 {
		gens := make([]string, len(c.loaded))
		for i, g := range c.loaded {
			gens[i] = fmt.Sprint(g)
		}
		what, why := "enforcers", "the manager pushes it to the enforcers within a second or two; one it cannot reach reloads ConfigMap "+
			wellknown.ConfigMapName+" when the kubelet updates it, usually within a minute"
		if c.service {
			// A namespace has a few service pods: name them.
			what = fmt.Sprintf("rate limit service pods (%s)", podNames(olderPods))
			why = "the service reloads ConfigMap " + wellknown.ServiceConfigMapName + " when the kubelet updates it, usually within a minute"
		}
		parts = append(parts, fmt.Sprintf("%d of %d %s %s generation %s of the policy, not %d: %s",
			older, c.counts.Injected, what, plural(int32(older), "runs", "run"), strings.Join(gens, " and "), p.Generation, why))
	}
	var missing []selectedPod
	for _, sp := range c.missing {
		if e := sp.Polled.Status.Config.LastReloadError; e != "" {
			reloadErrors = append(reloadErrors, fmt.Sprintf("%s on pod %s refused the latest configuration: %s", c.runner(), sp.Pod.Name, e))
			continue
		}
		missing = append(missing, sp)
	}
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("the %s on %s has not loaded the policy yet", c.runner(), podNames(missing)))
	}
	parts = append(parts, capped(reloadErrors, podsNamedInMessage)...)
	return strings.Join(parts, "; ")
}

// restartMessage names the pods whose enforcer forwards to another port
// than spec.upstreamPort, and how to restart them.
func restartMessage(p *v1alpha1.RateLimitPolicy, restart []restartEnforcer) string {
	if len(restart) == 0 {
		return ""
	}
	pods := make([]selectedPod, len(restart))
	var ports []string
	for i, r := range restart {
		pods[i] = r.selectedPod
		if port := fmt.Sprint(r.port); !slices.Contains(ports, port) {
			ports = append(ports, port)
		}
	}
	n := int32(len(pods))
	return fmt.Sprintf("%s %s to port %s, not to spec.upstreamPort %d: an enforcer takes its upstream port when its pod starts, so %s",
		podNames(pods), plural(n, "forwards", "forward"), strings.Join(ports, " and "), p.Spec.UpstreamPort, recreateAdvice(pods))
}

// overloadedMessage names the enforcers that refuse new requests for want
// of room, with what they hold.
func overloadedMessage(runner string, overloaded []overloadedEnforcer) string {
	parts := make([]string, 0, len(overloaded))
	for _, o := range overloaded {
		var shed int64
		for _, n := range o.overload.Shed {
			shed += n
		}
		parts = append(parts, fmt.Sprintf("%s on pod %s is overloaded and refuses new requests with 503 (%d of %d requests in flight, %d connections; %d shed since it started): "+
			"clients hold many slow requests; see its sluice_enforcer_shed_total, or raise its memory limit", runner, o.pod.Name, o.overload.InFlight, o.overload.MaxInFlight,
			o.overload.Connections, shed))
	}
	return strings.Join(capped(parts, podsNamedInMessage), "; ")
}

// degradedMessage groups the enforcers that cannot reach Redis by error.
func degradedMessage(runner string, degraded []degradedEnforcer) string {
	type group struct {
		err, failureMode string
		pods             []*corev1.Pod
	}
	var groups []*group
	for _, d := range degraded {
		i := slices.IndexFunc(groups, func(g *group) bool { return g.err == d.err && g.failureMode == d.failureMode })
		if i < 0 {
			groups = append(groups, &group{err: d.err, failureMode: d.failureMode})
			i = len(groups) - 1
		}
		groups[i].pods = append(groups[i].pods, d.pod)
	}
	parts := make([]string, 0, len(groups))
	for _, g := range groups {
		names := make([]string, len(g.pods))
		for i, pod := range g.pods {
			names[i] = pod.Name
		}
		err := g.err
		if err == "" {
			err = "unreachable"
		}
		parts = append(parts, fmt.Sprintf("%s on %s cannot reach Redis: %s; %s",
			runner, podNameList(names), err, failingAs(g.failureMode)))
	}
	return strings.Join(parts, "; ")
}

// failingAs says what an enforcer does while Redis is unreachable.
func failingAs(mode string) string {
	switch v1alpha1.FailureMode(mode) {
	case v1alpha1.FailureModeClosed:
		return "failing closed (requests get 503)"
	case v1alpha1.FailureModeLocalFallback:
		return "limiting in memory (LocalFallback)"
	default:
		return "failing open"
	}
}

func podNames(pods []selectedPod) string {
	names := make([]string, len(pods))
	for i, sp := range pods {
		names[i] = sp.Pod.Name
	}
	return podNameList(names)
}

// podNameList is "pod a", "pods a, b" or "pods a, b, c and 2 more".
func podNameList(names []string) string {
	if len(names) == 1 {
		return "pod " + names[0]
	}
	return "pods " + strings.Join(capped(names, podsNamedInMessage), ", ")
}

// capped keeps the first n items and says how many it left out.
func capped(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	out := slices.Clone(items[:n])
	out[n-1] += fmt.Sprintf(" and %d more", len(items)-n)
	return out
}

// recreateAdvice says how to have the pods created again, injected: a
// rollout restart of the Deployments, StatefulSets and DaemonSets that own
// them, and deleting the others (a bare pod is then created again by the
// user, one of another owner by that owner).
func recreateAdvice(pods []selectedPod) string {
	var workloads, bare, owned []string
	for _, sp := range pods {
		switch w, rollout := workloadOf(sp.Pod); {
		case rollout:
			if !slices.Contains(workloads, w) {
				workloads = append(workloads, w)
			}
		case w == "":
			bare = append(bare, sp.Pod.Name)
		default:
			owned = append(owned, fmt.Sprintf("%s (its %s creates it again)", sp.Pod.Name, w))
		}
	}
	var advice []string
	if len(workloads) > 0 {
		advice = append(advice, "restart "+strings.Join(capped(workloads, podsNamedInMessage), ", "))
	}
	if len(bare) > 0 {
		advice = append(advice, fmt.Sprintf("delete and create again %s, which no controller owns", podNameList(bare)))
	}
	if len(owned) > 0 {
		advice = append(advice, "delete "+podNameList(owned))
	}
	return strings.Join(advice, "; ")
}

// workloadOf names the controller of the pod, "deployment/api" for the
// pods of a Deployment's ReplicaSets, and says whether kubectl rollout
// restart can recreate its pods; "" for a pod without a controller.
func workloadOf(pod *corev1.Pod) (string, bool) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return "", false
	}
	if owner.Kind == "ReplicaSet" {
		// A Deployment names its ReplicaSets <deployment>-<pod-template-hash>.
		if hash := pod.Labels["pod-template-hash"]; hash != "" && strings.HasSuffix(owner.Name, "-"+hash) {
			return "deployment/" + strings.TrimSuffix(owner.Name, "-"+hash), true
		}
	}
	name := strings.ToLower(owner.Kind) + "/" + owner.Name
	gv, _ := schema.ParseGroupVersion(owner.APIVersion)
	return name, gv.Group == "apps" && (owner.Kind == "StatefulSet" || owner.Kind == "DaemonSet")
}

// maxConditionMessage is far below the API's 32768 bytes: a message is read
// by people in kubectl output.
const maxConditionMessage = 4096

func limitMessage(msg string) string {
	return conditions.Truncate(msg, maxConditionMessage)
}

// readyEvent returns the Event of a change of Ready's status or reason,
// nil when neither changed or while the outcome is Unknown.
func readyEvent(before, after *metav1.Condition) *conditions.Event {
	if after == nil || (before != nil && before.Status == after.Status && before.Reason == after.Reason) {
		return nil
	}
	if after.Status == metav1.ConditionUnknown {
		return nil // a generation being compiled: the next transition tells
	}
	eventType := corev1.EventTypeWarning
	if after.Status == metav1.ConditionTrue {
		eventType = corev1.EventTypeNormal
	}
	return &conditions.Event{Type: eventType, Reason: after.Reason, Note: after.Message}
}

func plural(n int32, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
