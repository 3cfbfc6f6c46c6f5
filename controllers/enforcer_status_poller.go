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
)

// enforcerPoller is the manager Runnable that polls, on an interval, the
// enforcers of every pod some policy selects, all namespaces at once with
// a bounded number of requests in flight, each within the client's
// timeout. It keeps the latest answer of each pod and enqueues the
// namespaces whose answers changed, so that Reconcile, which reads them,
// never waits on the network: unreachable pods of one namespace delay no
// other namespace's status.
type enforcerPoller struct {
	reader   client.Reader
	secrets  client.Reader
	client   func() *http.Client
	interval time.Duration
	workers  int
	// changed receives a namespace's ConfigMap key (its reconcile key)
	// when the answers of its enforcers changed.
	changed chan event.GenericEvent

	mu      sync.Mutex
	results map[types.UID]polledEnforcer
}

func newEnforcerPoller(reader, secrets client.Reader, c func() *http.Client, interval time.Duration, workers int) *enforcerPoller {
	return &enforcerPoller{reader: reader, secrets: secrets, client: c, interval: interval, workers: workers,
		changed: make(chan event.GenericEvent, 64), results: map[types.UID]polledEnforcer{}}
}

// NeedLeaderElection: only the leader writes status, so only it polls.
func (p *enforcerPoller) NeedLeaderElection() bool { return true }

// Start polls until ctx ends.
func (p *enforcerPoller) Start(ctx context.Context) error {
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

// pollAll polls every selected enforcer of the cluster once and enqueues
// the namespaces whose answers changed.
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
	type target struct {
		namespace, token string
		pod              *corev1.Pod
	}
	var targets []target
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
		for i := range pods.Items {
			pod := &pods.Items[i]
			if isActive(pod) && hasEnforcer(pod) && len(selectingPolicies(pod, nsPolicies)) > 0 {
				targets = append(targets, target{namespace: namespace, token: token, pod: pod})
			}
		}
	}

	// One pool for every pod of the cluster: unreachable pods take a worker
	// each for one timeout, not a namespace's turn.
	answers := make([]polledEnforcer, len(targets))
	var wg sync.WaitGroup
	slots := make(chan struct{}, max(p.workers, 1))
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			answers[i] = pollEnforcer(ctx, p.client(), t.pod, t.token)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}

	p.mu.Lock()
	changed := map[string]bool{}
	seen := make(map[types.UID]bool, len(targets))
	for i, t := range targets {
		seen[t.pod.UID] = true
		if before, ok := p.results[t.pod.UID]; !ok || !samePolled(before, answers[i]) {
			changed[t.namespace] = true
		}
		p.results[t.pod.UID] = answers[i]
	}
	for uid := range p.results {
		if !seen[uid] {
			delete(p.results, uid)
		}
	}
	p.mu.Unlock()
	for namespace := range changed {
		obj := &corev1.ConfigMap{}
		obj.Namespace, obj.Name = namespace, ConfigMapName
		select {
		case p.changed <- event.GenericEvent{Object: obj}:
		case <-ctx.Done():
			return
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

// remember keeps an answer Reconcile fetched itself, for a pod the poller
// had not reached yet.
func (p *enforcerPoller) remember(pod *corev1.Pod, res polledEnforcer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.results[pod.UID] = res
}

func samePolled(a, b polledEnforcer) bool {
	return reflect.DeepEqual(a, b)
}
