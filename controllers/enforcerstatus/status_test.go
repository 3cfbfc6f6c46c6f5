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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/conditions"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 = metav1.NewTime(t0.Add(time.Minute))
)

func newPolicy(generation int64) *v1alpha1.RateLimitPolicy {
	return &v1alpha1.RateLimitPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RateLimitPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "shop", Generation: generation},
		Spec: v1alpha1.RateLimitPolicySpec{Rules: []v1alpha1.Rule{
			{Name: "health", Exempt: true},
			{Name: "api", Algorithm: v1alpha1.AlgorithmTokenBucket},
			{Name: "exports", Algorithm: v1alpha1.AlgorithmSlidingWindowLog},
		}},
	}
}

// kstatusOf is what kubectl wait, Flux and Argo CD make of the status.
func kstatusOf(g *WithT, p *v1alpha1.RateLimitPolicy) kstatus.Status {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}

type wantCondition struct {
	status metav1.ConditionStatus
	reason string
}

func conditionsOf(p *v1alpha1.RateLimitPolicy) map[string]wantCondition {
	out := map[string]wantCondition{}
	for _, c := range p.Status.Conditions {
		out[c.Type] = wantCondition{c.Status, c.Reason}
	}
	return out
}

const policyUID = "7d0b2f64-8f1e-4a55-a1de-0c1e2f3a4b5c"

// acceptedPolicy is generation 4 of policy api, accepted by the policy
// controller.
func acceptedPolicy() *v1alpha1.RateLimitPolicy {
	p := newPolicy(4)
	p.UID = policyUID
	p.Status.ObservedGeneration = 4
	p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonCompiled, ObservedGeneration: 4, LastTransitionTime: t0}}
	return p
}

// deploymentPod is a pod of deployment api, injected unless told otherwise.
func deploymentPod(name string, injected bool) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "shop",
		Labels:          map[string]string{"app": "api", "pod-template-hash": "7c9d8f6b5"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "api-7c9d8f6b5", Controller: new(true)}},
	}}
	if injected {
		pod.Spec.InitContainers = []corev1.Container{{Name: wellknown.EnforcerContainerName}}
	}
	return pod
}

// healthy is the /status of an enforcer that runs generation gen of the
// policy and reaches its Redis.
func healthy(gen int64, allowed, denied int64) *statusdoc.Document {
	return &statusdoc.Document{
		Ready:     true,
		Config:    statusdoc.Config{Hash: "abc"},
		Policies:  []statusdoc.Policy{{Name: "api", UID: policyUID, Generation: gen, FailureMode: "Open", Redis: "default"}},
		Redis:     []statusdoc.Redis{{Name: "default", Reachable: true}},
		Decisions: map[string]statusdoc.DecisionCounts{"api": {Allowed: allowed, Denied: denied}, "other": {Allowed: 1000}},
	}
}

func forwardingTo(st *statusdoc.Document, upstream string) *statusdoc.Document {
	st.Upstream = upstream
	return st
}

func redisDown(st *statusdoc.Document, mode string) *statusdoc.Document {
	st.Policies[0].FailureMode = mode
	st.Redis[0].Reachable = false
	st.Redis[0].LastError = "dial tcp 10.0.0.9:6379: connect: connection refused"
	return st
}

func answered(name string, st *statusdoc.Document) selectedPod {
	return selectedPod{Pod: deploymentPod(name, true), Decision: inject.Decision{Reason: inject.ReasonAlreadyInjected},
		Polled: polledEnforcer{Address: "10.0.0.3:15081", Status: st}}
}

func TestSetEnforcerStatus(t *testing.T) {
	predates := selectedPod{Pod: deploymentPod("api-7c9d8f6b5-x2k4p", false), Decision: inject.Decision{Inject: true, Reason: inject.ReasonInjected}}
	tests := []struct {
		name     string
		policy   func() *v1alpha1.RateLimitPolicy
		pods     []selectedPod
		status   metav1.ConditionStatus
		reason   string
		message  string
		counts   v1alpha1.EnforcerCounts
		kstatus  kstatus.Status
		decision v1alpha1.DecisionCounts
	}{{
		name:    "no pod selected",
		status:  metav1.ConditionTrue,
		reason:  v1alpha1.ReasonNoPodsSelected,
		message: "no running pod matches spec.selector; the enforcers of matching pods apply this generation as they start",
		counts:  v1alpha1.EnforcerCounts{Summary: "0/0"},
		kstatus: kstatus.CurrentStatus,
	}, {
		name: "generation not accepted",
		policy: func() *v1alpha1.RateLimitPolicy {
			p := acceptedPolicy()
			p.Status.Conditions[0].Status, p.Status.Conditions[0].Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec
			return p
		},
		pods:     []selectedPod{answered("api-0", healthy(3, 1, 0))},
		status:   metav1.ConditionFalse,
		reason:   v1alpha1.ReasonNotAccepted,
		message:  "generation 4 was not accepted: see the Accepted condition for what to change",
		counts:   v1alpha1.EnforcerCounts{Selected: 1, Injected: 1, Ready: 1, Summary: "1/1"},
		decision: v1alpha1.DecisionCounts{Allowed: 1},
		kstatus:  kstatus.InProgressStatus,
	}, {
		name:     "every enforcer runs the generation and reaches Redis",
		pods:     []selectedPod{answered("api-0", healthy(4, 10, 2)), answered("api-1", healthy(4, 5, 1))},
		status:   metav1.ConditionTrue,
		reason:   v1alpha1.ReasonEnforcersReady,
		message:  "2 of 2 enforcers run generation 4 and reach Redis",
		counts:   v1alpha1.EnforcerCounts{Selected: 2, Injected: 2, Ready: 2, UpToDate: 2, Summary: "2/2"},
		decision: v1alpha1.DecisionCounts{Allowed: 15, Denied: 3},
		kstatus:  kstatus.CurrentStatus,
	}, {
		name:    "a pod predates the policy",
		pods:    []selectedPod{answered("api-0", healthy(4, 0, 0)), predates},
		status:  metav1.ConditionFalse,
		reason:  v1alpha1.ReasonEnforcersNotReady,
		message: "1 of 2 selected pods has no enforcer: pod api-7c9d8f6b5-x2k4p predates the policy or was created while the injection webhook was unavailable: restart deployment/api",
		counts:  v1alpha1.EnforcerCounts{Selected: 2, Injected: 1, Ready: 1, UpToDate: 1, Summary: "1/2"},
		kstatus: kstatus.InProgressStatus,
	}, {
		name: "the namespace is not labelled for injection",
		pods: []selectedPod{{Pod: deploymentPod("api-0", false), Decision: inject.Decision{Reason: inject.ReasonNamespaceNotEnabled}},
			{Pod: deploymentPod("api-1", false), Decision: inject.Decision{Reason: inject.ReasonNamespaceNotEnabled}}},
		status:  metav1.ConditionFalse,
		reason:  v1alpha1.ReasonEnforcersNotReady,
		message: "2 of 2 selected pods have no enforcer: namespace shop is not labelled sluice.dev/injection=enabled: label it, then restart deployment/api",
		counts:  v1alpha1.EnforcerCounts{Selected: 2, Summary: "0/2"},
		kstatus: kstatus.InProgressStatus,
	}, {
		name: "a pod opts out",
		pods: []selectedPod{answered("api-0", healthy(4, 0, 0)), {Pod: deploymentPod("api-debug", false),
			Decision: inject.Decision{Reason: inject.ReasonOptedOut, Message: `the pod opts out with sluice.dev/inject: "false", so policy api is not enforced on it`}}},
		status:  metav1.ConditionTrue,
		reason:  v1alpha1.ReasonEnforcersReady,
		message: "1 of 1 enforcer runs generation 4 and reaches Redis; pod api-debug opts out with sluice.dev/inject=false and is not limited",
		counts:  v1alpha1.EnforcerCounts{Selected: 1, Injected: 1, Ready: 1, UpToDate: 1, Summary: "1/1"},
		kstatus: kstatus.CurrentStatus,
	}, {
		name:    "every selected pod opts out",
		pods:    []selectedPod{{Pod: deploymentPod("api-debug", false), Decision: inject.Decision{Reason: inject.ReasonOptedOut}}},
		status:  metav1.ConditionTrue,
		reason:  v1alpha1.ReasonNoPodsSelected,
		message: "pod api-debug opts out with sluice.dev/inject=false and is not limited; no other running pod matches spec.selector",
		counts:  v1alpha1.EnforcerCounts{Summary: "0/0"},
		kstatus: kstatus.CurrentStatus,
	}, {
		name: "a bare pod and a pod of a Job predate the policy",
		pods: []selectedPod{answered("api-0", healthy(4, 0, 0)),
			{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late-0", Namespace: "shop"}}, Decision: inject.Decision{Inject: true, Reason: inject.ReasonInjected}},
			{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "report-x1", Namespace: "shop", OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "batch/v1", Kind: "Job", Name: "report", Controller: new(true)}}}}, Decision: inject.Decision{Inject: true, Reason: inject.ReasonInjected}}},
		status: metav1.ConditionFalse,
		reason: v1alpha1.ReasonEnforcersNotReady,
		message: "2 of 3 selected pods have no enforcer: pods late-0, report-x1 predate the policy or were created while the injection webhook was unavailable: " +
			"delete and create again pod late-0, which no controller owns; delete pod report-x1 (its job/report creates it again)",
		counts:  v1alpha1.EnforcerCounts{Selected: 3, Injected: 1, Ready: 1, UpToDate: 1, Summary: "1/3"},
		kstatus: kstatus.InProgressStatus,
	}, {
		name: "an enforcer does not answer, a pod has no IP yet",
		pods: []selectedPod{answered("api-0", healthy(4, 0, 0)),
			{Pod: deploymentPod("api-1", true), Polled: polledEnforcer{Address: "10.0.0.4:15081", Err: "connection refused"}},
			{Pod: deploymentPod("api-2", true), Polled: polledEnforcer{Err: "has no IP yet (Pending)"}}},
		status:  metav1.ConditionFalse,
		reason:  v1alpha1.ReasonEnforcersNotReady,
		message: "enforcer on pod api-1 does not answer on 10.0.0.4:15081: connection refused; pod api-2 has no IP yet (Pending)",
		counts:  v1alpha1.EnforcerCounts{Selected: 3, Injected: 3, Ready: 1, UpToDate: 1, Summary: "1/3"},
		kstatus: kstatus.InProgressStatus,
	}, {
		name:     "enforcers run an older generation",
		pods:     []selectedPod{answered("api-0", healthy(4, 1, 0)), answered("api-1", healthy(3, 1, 0)), answered("api-2", healthy(2, 1, 0))},
		status:   metav1.ConditionFalse,
		reason:   v1alpha1.ReasonEnforcersStale,
		message:  "2 of 3 enforcers run generation 2 and 3 of the policy, not 4: the manager pushes it to the enforcers within a second or two; one it cannot reach reloads ConfigMap sluice-enforcer-config when the kubelet updates it, usually within a minute",
		counts:   v1alpha1.EnforcerCounts{Selected: 3, Injected: 3, Ready: 3, UpToDate: 1, Summary: "3/3"},
		decision: v1alpha1.DecisionCounts{Allowed: 3},
		kstatus:  kstatus.InProgressStatus,
	}, {
		name: "spec.upstreamPort changed after the pods started",
		policy: func() *v1alpha1.RateLimitPolicy {
			p := acceptedPolicy()
			p.Spec.UpstreamPort = 9090
			return p
		},
		pods: []selectedPod{answered("api-0", forwardingTo(healthy(4, 0, 0), "http://127.0.0.1:8080")),
			answered("api-1", forwardingTo(healthy(4, 0, 0), "http://127.0.0.1:8080")),
			answered("api-2", forwardingTo(healthy(4, 0, 0), "http://127.0.0.1:9090"))},
		status: metav1.ConditionFalse,
		reason: v1alpha1.ReasonRestartRequired,
		message: "pods api-0, api-1 forward to port 8080, not to spec.upstreamPort 9090: an enforcer takes its upstream port when its pod starts, " +
			"so restart deployment/api",
		counts:  v1alpha1.EnforcerCounts{Selected: 3, Injected: 3, Ready: 3, UpToDate: 1, Summary: "3/3"},
		kstatus: kstatus.InProgressStatus,
	}, {
		name: "an enforcer is overloaded",
		pods: []selectedPod{answered("api-0", healthy(4, 0, 0)), answered("api-1", func() *statusdoc.Document {
			st := healthy(4, 0, 0)
			st.Overload = &statusdoc.Overload{Overloaded: true, InFlight: 905, MaxInFlight: 905, Connections: 40,
				Shed: map[string]int64{"in_flight": 9000, "memory": 95}}
			return st
		}())},
		status: metav1.ConditionFalse,
		reason: v1alpha1.ReasonOverloaded,
		message: "enforcer on pod api-1 is overloaded and refuses new requests with 503 (905 of 905 requests in flight, 40 connections; 9095 shed since it started): " +
			"clients hold many slow requests; see its sluice_enforcer_shed_total, or raise its memory limit",
		counts:  v1alpha1.EnforcerCounts{Selected: 2, Injected: 2, Ready: 2, UpToDate: 2, Overloaded: 1, Summary: "2/2"},
		kstatus: kstatus.InProgressStatus,
	}, {
		name: "an enforcer refused the new configuration, another has not loaded the policy",
		pods: []selectedPod{
			answered("api-0", func() *statusdoc.Document {
				st := healthy(3, 0, 0)
				st.Config.LastReloadError = "policy api: environment variable SLUICE_REDIS_URL_API, which holds its Redis URL, is not set"
				return st
			}()),
			answered("api-1", &statusdoc.Document{Ready: true, Config: statusdoc.Config{Hash: "old"}}),
		},
		status: metav1.ConditionFalse,
		reason: v1alpha1.ReasonEnforcersStale,
		message: "the enforcer on pod api-1 has not loaded the policy yet; enforcer on pod api-0 refused the latest configuration: " +
			"policy api: environment variable SLUICE_REDIS_URL_API, which holds its Redis URL, is not set",
		counts:  v1alpha1.EnforcerCounts{Selected: 2, Injected: 2, Ready: 2, Summary: "2/2"},
		kstatus: kstatus.InProgressStatus,
	}, {
		name:    "enforcers cannot reach Redis and fail open",
		pods:    []selectedPod{answered("api-7c9", redisDown(healthy(4, 0, 0), "Open")), answered("api-8d1", redisDown(healthy(4, 0, 0), "Open"))},
		status:  metav1.ConditionFalse,
		reason:  v1alpha1.ReasonDegraded,
		message: "enforcer on pods api-7c9, api-8d1 cannot reach Redis: dial tcp 10.0.0.9:6379: connect: connection refused; failing open",
		counts:  v1alpha1.EnforcerCounts{Selected: 2, Injected: 2, Ready: 2, UpToDate: 2, Degraded: 2, Summary: "2/2"},
		kstatus: kstatus.InProgressStatus,
	}, {
		name: "a fail-closed enforcer without Redis is not ready, and says why",
		pods: []selectedPod{answered("api-7c9", func() *statusdoc.Document {
			st := redisDown(healthy(4, 0, 0), "Closed")
			st.Ready = false
			return st
		}())},
		status:  metav1.ConditionFalse,
		reason:  v1alpha1.ReasonDegraded,
		message: "enforcer on pod api-7c9 cannot reach Redis: dial tcp 10.0.0.9:6379: connect: connection refused; failing closed (requests get 503)",
		counts:  v1alpha1.EnforcerCounts{Selected: 1, Injected: 1, UpToDate: 1, Degraded: 1, Summary: "0/1"},
		kstatus: kstatus.InProgressStatus,
	}, {
		name: "the reason is the most pressing problem; the message lists them all",
		pods: []selectedPod{answered("api-0", redisDown(healthy(4, 0, 0), "LocalFallback")), answered("api-1", healthy(3, 0, 0)),
			{Pod: deploymentPod("api-2", true), Polled: polledEnforcer{Address: "10.0.0.4:15081", Err: "context deadline exceeded"}}},
		status: metav1.ConditionFalse,
		reason: v1alpha1.ReasonEnforcersNotReady,
		message: "enforcer on pod api-2 does not answer on 10.0.0.4:15081: context deadline exceeded; " +
			"1 of 3 enforcers runs generation 3 of the policy, not 4: the manager pushes it to the enforcers within a second or two; one it cannot reach reloads ConfigMap sluice-enforcer-config when the kubelet updates it, usually within a minute; " +
			"enforcer on pod api-0 cannot reach Redis: dial tcp 10.0.0.9:6379: connect: connection refused; limiting in memory (LocalFallback)",
		counts:  v1alpha1.EnforcerCounts{Selected: 3, Injected: 3, Ready: 2, UpToDate: 1, Degraded: 1, Summary: "2/3"},
		kstatus: kstatus.InProgressStatus,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			newP := acceptedPolicy
			if tt.policy != nil {
				newP = tt.policy
			}
			p := newP()
			event := setEnforcerStatus(p, tt.pods, publishedEntries{}, t0)

			ready := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(tt.status))
			g.Expect(ready.Reason).To(Equal(tt.reason))
			g.Expect(ready.Message).To(Equal(tt.message))
			g.Expect(ready.ObservedGeneration).To(BeEquivalentTo(4))
			g.Expect(p.Status.Enforcers).To(Equal(tt.counts))
			g.Expect(p.Status.Decisions).To(Equal(tt.decision))
			g.Expect(kstatusOf(g, p)).To(Equal(tt.kstatus))

			wantType := corev1.EventTypeWarning
			if tt.status == metav1.ConditionTrue {
				wantType = corev1.EventTypeNormal
			}
			g.Expect(event).To(Equal(&conditions.Event{Type: wantType, Reason: tt.reason, Note: tt.message}))

			again := p.DeepCopy()
			g.Expect(setEnforcerStatus(again, tt.pods, publishedEntries{}, t1)).To(BeNil(), "no Event without a transition")
			g.Expect(again.Status).To(Equal(p.Status), "a second pass changes nothing")
		})
	}
}

func TestReadyFollowsGenerations(t *testing.T) {
	g := NewWithT(t)
	p := acceptedPolicy()
	pods := []selectedPod{answered("api-0", healthy(4, 0, 0))}
	setEnforcerStatus(p, pods, publishedEntries{}, t0)
	g.Expect(conditionsOf(p)).To(HaveKeyWithValue(v1alpha1.ConditionReady, wantCondition{metav1.ConditionTrue, v1alpha1.ReasonEnforcersReady}))

	p.Generation = 5 // edited; the enforcers still run 4
	g.Expect(setEnforcerStatus(p, pods, publishedEntries{}, t1)).To(BeNil(), "no Event while generation 5 is being compiled")
	g.Expect(conditionsOf(p)).To(HaveKeyWithValue(v1alpha1.ConditionReady, wantCondition{metav1.ConditionUnknown, v1alpha1.ReasonProgressing}))

	apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionAccepted).ObservedGeneration = 5
	event := setEnforcerStatus(p, pods, publishedEntries{}, t1)
	g.Expect(event).To(HaveField("Reason", v1alpha1.ReasonEnforcersStale))
	ready := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.LastTransitionTime).To(Equal(t1))
	g.Expect(ready.ObservedGeneration).To(BeEquivalentTo(5))

	event = setEnforcerStatus(p, []selectedPod{answered("api-0", healthy(5, 0, 0))}, publishedEntries{}, t1)
	g.Expect(event).To(HaveField("Reason", v1alpha1.ReasonEnforcersReady))
}

func TestPodNameList(t *testing.T) {
	g := NewWithT(t)
	g.Expect(podNameList([]string{"a"})).To(Equal("pod a"))
	g.Expect(podNameList([]string{"a", "b", "c"})).To(Equal("pods a, b, c"))
	g.Expect(podNameList([]string{"a", "b", "c", "d", "e"})).To(Equal("pods a, b, c and 2 more"))
}

func TestWorkloadOf(t *testing.T) {
	g := NewWithT(t)
	workload := func(pod *corev1.Pod) []any {
		name, rollout := workloadOf(pod)
		return []any{name, rollout}
	}
	g.Expect(workload(deploymentPod("api-7c9d8f6b5-x2k4p", false))).To(Equal([]any{"deployment/api", true}))
	owned := func(apiVersion, kind, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: apiVersion, Kind: kind, Name: name, Controller: new(true)}}}}
	}
	g.Expect(workload(owned("apps/v1", "StatefulSet", "db"))).To(Equal([]any{"statefulset/db", true}))
	g.Expect(workload(owned("apps/v1", "DaemonSet", "agent"))).To(Equal([]any{"daemonset/agent", true}))
	g.Expect(workload(owned("apps/v1", "ReplicaSet", "loose"))).To(Equal([]any{"replicaset/loose", false}))
	g.Expect(workload(owned("batch/v1", "Job", "report"))).To(Equal([]any{"job/report", false}))
	g.Expect(workload(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "debug"}})).To(Equal([]any{"", false}))
}

// TestReadyFollowsAccepted: Ready is the status controller's alone, and
// follows the Accepted condition the policy controller owns: unknown until
// the generation is compiled, then what the enforcers say.
func TestReadyFollowsAccepted(t *testing.T) {
	g := NewWithT(t)
	p := newPolicy(4)
	p.UID = policyUID
	pods := []selectedPod{answered("api-0", healthy(4, 0, 0))}
	g.Expect(setEnforcerStatus(p, pods, publishedEntries{}, t0)).To(BeNil(), "no Event while Ready is unknown")
	g.Expect(conditionsOf(p)).To(Equal(map[string]wantCondition{v1alpha1.ConditionReady: {metav1.ConditionUnknown, v1alpha1.ReasonProgressing}}),
		"before the policy controller compiled the generation, Ready is present and not known")

	p.Status.Conditions = append(p.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonCompiled, ObservedGeneration: 4, LastTransitionTime: t1})
	event := setEnforcerStatus(p, pods, publishedEntries{}, t1)
	g.Expect(conditionsOf(p)).To(HaveKeyWithValue(v1alpha1.ConditionReady, wantCondition{metav1.ConditionTrue, v1alpha1.ReasonEnforcersReady}))
	g.Expect(event).To(HaveField("Reason", v1alpha1.ReasonEnforcersReady))
	g.Expect(conditionsOf(p)).To(HaveKeyWithValue(v1alpha1.ConditionAccepted, wantCondition{metav1.ConditionTrue, v1alpha1.ReasonCompiled}),
		"Accepted is read, never written")
}

// An enforcer on an older configuration of the namespace runs the
// policy's current entry when only another policy changed since: the
// policy stays Ready. Under LocalFallback, an older configuration counting
// other pods gives the wrong share, and one the controller never saw may:
// the enforcer is not up to date until it loads the published one.
func TestReadyFollowsThePolicysOwnEntry(t *testing.T) {
	entry := publishedEntry{Generation: 4, Replicas: 2, FailureMode: "Open"}
	fallback := publishedEntry{Generation: 4, Replicas: 2, FailureMode: "LocalFallback"}
	tests := []struct {
		name      string
		published publishedEntries
		wantReady bool
	}{
		{"another policy changed", publishedEntries{Hash: "abc", Current: &entry, Earlier: map[string]publishedEntry{"old": entry}}, true},
		{"pod count changed, failing open", publishedEntries{Hash: "abc", Current: &entry,
			Earlier: map[string]publishedEntry{"old": {Generation: 4, Replicas: 1, FailureMode: "Open"}}}, true},
		{"another policy changed, LocalFallback", publishedEntries{Hash: "abc", Current: &fallback, Earlier: map[string]publishedEntry{"old": fallback}}, true},
		{"pod count changed, LocalFallback", publishedEntries{Hash: "abc", Current: &fallback,
			Earlier: map[string]publishedEntry{"old": {Generation: 4, Replicas: 1, FailureMode: "LocalFallback"}}}, false},
		{"configuration never seen, LocalFallback", publishedEntries{Hash: "abc", Current: &fallback}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := acceptedPolicy()
			pods := []selectedPod{answered("api-0", healthy(4, 0, 0)), answered("api-1", healthy(4, 0, 0))}
			pods[1].Polled.Status.Config.Hash = "old"

			setEnforcerStatus(p, pods, tt.published, t0)
			ready := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			if tt.wantReady {
				g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
				g.Expect(p.Status.Enforcers.UpToDate).To(BeEquivalentTo(2))
				return
			}
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonEnforcersStale))
			g.Expect(ready.Message).To(ContainSubstring("pod api-1 has not loaded this policy's latest entry of sluice-enforcer-config yet"))
			g.Expect(p.Status.Enforcers.UpToDate).To(BeEquivalentTo(1))

			pods[1].Polled.Status.Config.Hash = "abc"
			setEnforcerStatus(p, pods, tt.published, t1)
			g.Expect(conditionsOf(p)).To(HaveKeyWithValue(v1alpha1.ConditionReady, wantCondition{metav1.ConditionTrue, v1alpha1.ReasonEnforcersReady}))
		})
	}
}

// TestConfigHistory: the history keeps each configuration's entries by
// hash, the published one last, and a bounded number of them.
func TestConfigHistory(t *testing.T) {
	g := NewWithT(t)
	doc := func(replicas int32) string {
		p := acceptedPolicy()
		p.Spec.FailureMode = v1alpha1.FailureModeLocalFallback
		p.Spec.Tiers, p.Spec.Overrides = nil, nil
		p.Spec.Rules = []v1alpha1.Rule{{Name: "api", Algorithm: v1alpha1.AlgorithmTokenBucket,
			Limits: []v1alpha1.Limit{{Requests: 10, Period: metav1.Duration{Duration: time.Minute}}}}}
		res, err := compile.Namespace("shop", []v1alpha1.RateLimitPolicy{*p}, compile.Options{Replicas: map[string]int32{"api": replicas}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Errors).To(BeEmpty())
		return string(res.JSON)
	}
	var h configHistory
	h.observe("shop", "one", doc(1))
	e := entriesFor(h.observe("shop", "two", doc(2)), policyUID)
	g.Expect(e.Hash).To(Equal("two"))
	g.Expect(e.Current).To(HaveValue(Equal(publishedEntry{Generation: 4, Replicas: 2, FailureMode: "LocalFallback"})))
	g.Expect(e.Earlier).To(HaveKeyWithValue("one", publishedEntry{Generation: 4, Replicas: 1, FailureMode: "LocalFallback"}))

	for i := range configsRemembered {
		h.observe("shop", fmt.Sprint(i), doc(int32(i)))
	}
	e = entriesFor(h.observe("shop", "two", doc(2)), policyUID)
	g.Expect(e.Hash).To(Equal("two"))
	g.Expect(e.Earlier).NotTo(HaveKey("one"))
	g.Expect(e.Earlier).To(HaveLen(configsRemembered - 1))

	h.forget("shop")
	g.Expect(entriesFor(h.observe("shop", "", ""), policyUID)).To(Equal(publishedEntries{}))
}
