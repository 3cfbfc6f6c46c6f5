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
	"context"
	"net/http"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/controllers/watch"
	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// enforcerPoller is the manager Runnable that polls, on an interval, the
// enforcers of every pod some policy selects, and the rate limit service's
// pods of the namespaces with a policy of the service, all namespaces at once with
// a bounded number of requests in flight, each within the client's
// timeout. It keeps the latest answer of each pod and enqueues a namespace
// as soon as its own enforcers have answered and something changed, so
// that Reconcile, which reads the answers, never waits on the network and
// the unreachable pods of one namespace delay no other namespace's status:
// a pod that did not answer last time is polled in a lane of its own, and
// a pod Reconcile finds unpolled (just started, or with a new IP) is asked
// at once, outside the pass.
type enforcerPoller struct {
	reader   client.Reader
	secrets  client.Reader
	client   func() *http.Client
	interval time.Duration
	workers  int
	// changed receives a namespace's ConfigMap key (its reconcile key)
	// when the answers of its enforcers changed.
	changed chan event.GenericEvent
	// asked wakes the loop that polls the pods Reconcile asked for.
	asked chan struct{}

	mu      sync.Mutex
	results map[types.UID]polledEnforcer
	// wanted are the pods Reconcile asked for, not polled yet.
	wanted map[types.UID]*corev1.Pod
	// observe, when set, is told every answer polled (the pusher pushes
	// again to an enforcer found on an older revision).
	observe func(*corev1.Pod, *statusdoc.Document)
}

func newEnforcerPoller(reader, secrets client.Reader, c func() *http.Client, interval time.Duration, workers int) *enforcerPoller {
	return &enforcerPoller{reader: reader, secrets: secrets, client: c, interval: interval, workers: max(workers, 1),
		changed: make(chan event.GenericEvent, 64), asked: make(chan struct{}, 1),
		results: map[types.UID]polledEnforcer{}, wanted: map[types.UID]*corev1.Pod{}}
}

// NeedLeaderElection: only the leader writes status, so only it polls.
func (p *enforcerPoller) NeedLeaderElection() bool { return true }

// Start polls until ctx ends.
func (p *enforcerPoller) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { p.pollAsked(ctx) })
	ticker := time.NewTicker(p.interval)
	defer ticker.Stop()
	for {
		p.pollAll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// pollTarget is one enforcer to poll, with its namespace's credential.
type pollTarget struct {
	namespace, token string
	pod              *corev1.Pod
}

// pollAll polls every selected enforcer of the cluster once. Each
// namespace is enqueued, if its answers changed, as soon as its last
// enforcer has answered.
func (p *enforcerPoller) pollAll(ctx context.Context) {
	log := logf.FromContext(ctx).WithName("enforcer-poller")
	var policies v1alpha1.RateLimitPolicyList
	if err := p.reader.List(ctx, &policies); err != nil {
		log.Error(err, "list RateLimitPolicies")
		return
	}
	byNamespace := map[string][]v1alpha1.RateLimitPolicy{}
	for _, policy := range policies.Items {
		byNamespace[policy.Namespace] = append(byNamespace[policy.Namespace], policy)
	}
	targets := map[string][]pollTarget{}
	for namespace, nsPolicies := range byNamespace {
		var pods corev1.PodList
		if err := p.reader.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
			log.Error(err, "list pods", "namespace", namespace)
			continue
		}
		token, err := adminToken(ctx, p.secrets, namespace)
		if err != nil {
			log.Error(err, "read the status token", "namespace", namespace)
			continue
		}
		servicePolicies := hasRateLimitServicePolicy(nsPolicies)
		for i := range pods.Items {
			pod := &pods.Items[i]
			if !watch.ActivePod(pod) {
				continue
			}
			if servicePolicies && isRateLimitServicePod(pod) || inject.HasEnforcer(pod) && len(inject.SelectingPolicies(pod, nsPolicies)) > 0 {
				targets[namespace] = append(targets[namespace], pollTarget{namespace: namespace, token: token, pod: pod})
			}
		}
	}

	// One pool for every pod of the cluster, and a smaller one for the pods
	// that did not answer last time: they take a timeout each, and must not
	// hold every worker while the others wait.
	answering := make(chan struct{}, p.workers)
	silent := make(chan struct{}, max(p.workers/4, 1))
	var wg sync.WaitGroup
	for namespace, nsTargets := range targets {
		answers := make([]polledEnforcer, len(nsTargets))
		var left sync.WaitGroup
		for i, t := range nsTargets {
			slots := answering
			if p.silentBefore(t.pod) {
				slots = silent
			}
			left.Add(1)
			wg.Go(func() {
				defer left.Done()
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				defer func() { <-slots }()
				answers[i] = pollEnforcer(ctx, p.client(), t.pod, t.token)
			})
		}
		wg.Go(func() {
			left.Wait()
			if ctx.Err() == nil {
				p.record(ctx, namespace, nsTargets, answers)
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	p.forgetAllBut(targets)
}

// silentBefore tells whether the pod's enforcer did not answer its last
// poll at its current address.
func (p *enforcerPoller) silentBefore(pod *corev1.Pod) bool {
	res, ok := p.polled(pod)
	return ok && res.Status == nil && !res.Refused
}

// record keeps the answers of a namespace's enforcers and enqueues the
// namespace if any changed.
func (p *enforcerPoller) record(ctx context.Context, namespace string, targets []pollTarget, answers []polledEnforcer) {
	if p.observe != nil {
		for i, t := range targets {
			if answers[i].Status != nil {
				p.observe(t.pod, answers[i].Status)
			}
		}
	}
	p.mu.Lock()
	changed := false
	for i, t := range targets {
		if before, ok := p.results[t.pod.UID]; !ok || !samePolled(before, answers[i]) {
			changed = true
		}
		p.results[t.pod.UID] = answers[i]
	}
	p.mu.Unlock()
	if changed {
		p.enqueue(ctx, namespace)
	}
}

// recordPushed keeps what a push's answer says the pod's enforcer runs,
// as a poll's, and enqueues the namespace if it changed: the status turns
// with the push, not at the next poll.
func (p *enforcerPoller) recordPushed(ctx context.Context, pod *corev1.Pod, addr string, st *statusdoc.Document) {
	if current, _ := adminAddress(pod); current != addr {
		return
	}
	p.record(ctx, pod.Namespace, []pollTarget{{namespace: pod.Namespace, pod: pod}}, []polledEnforcer{{Address: addr, Status: st}})
}

// forgetAllBut drops the answers of the pods that are no longer polled.
func (p *enforcerPoller) forgetAllBut(targets map[string][]pollTarget) {
	seen := map[types.UID]bool{}
	for _, nsTargets := range targets {
		for _, t := range nsTargets {
			seen[t.pod.UID] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid := range p.results {
		if !seen[uid] {
			delete(p.results, uid)
		}
	}
}

func (p *enforcerPoller) enqueue(ctx context.Context, namespace string) {
	obj := &corev1.ConfigMap{}
	obj.Namespace, obj.Name = namespace, wellknown.ConfigMapName
	select {
	case p.changed <- event.GenericEvent{Object: obj}:
	case <-ctx.Done():
	}
}

// ask has the pod's enforcer polled at once, outside the pass; its
// namespace is enqueued when it answered (or failed to, within the
// timeout).
func (p *enforcerPoller) ask(pod *corev1.Pod) {
	p.mu.Lock()
	p.wanted[pod.UID] = pod.DeepCopy()
	p.mu.Unlock()
	select {
	case p.asked <- struct{}{}:
	default: // the loop is already woken
	}
}

// pollAsked polls the pods Reconcile asked for until ctx ends, in its own
// pool, so that a new pod is not kept waiting behind a pass.
func (p *enforcerPoller) pollAsked(ctx context.Context) {
	log := logf.FromContext(ctx).WithName("enforcer-poller")
	slots := make(chan struct{}, max(p.workers/2, 1))
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.asked:
		}
		p.mu.Lock()
		wanted := p.wanted
		p.wanted = map[types.UID]*corev1.Pod{}
		p.mu.Unlock()
		tokens := map[string]string{}
		for _, pod := range wanted {
			token, ok := tokens[pod.Namespace]
			if !ok {
				var err error
				if token, err = adminToken(ctx, p.secrets, pod.Namespace); err != nil {
					log.Error(err, "read the status token", "namespace", pod.Namespace)
				}
				tokens[pod.Namespace] = token
			}
			wg.Go(func() {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				defer func() { <-slots }()
				res := pollEnforcer(ctx, p.client(), pod, token)
				if ctx.Err() == nil {
					p.record(ctx, pod.Namespace, []pollTarget{{namespace: pod.Namespace, token: token, pod: pod}}, []polledEnforcer{res})
				}
			})
		}
	}
}

// polled is the latest answer of the pod's enforcer, if the poller has one
// from the pod's current address.
func (p *enforcerPoller) polled(pod *corev1.Pod) (polledEnforcer, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	res, ok := p.results[pod.UID]
	if !ok {
		return polledEnforcer{}, false
	}
	if addr, _ := adminAddress(pod); addr != res.Address {
		return polledEnforcer{}, false
	}
	return res, true
}

func samePolled(a, b polledEnforcer) bool {
	return reflect.DeepEqual(a, b)
}
