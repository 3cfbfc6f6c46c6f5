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

// Package delivery pushes each namespace's compiled configuration to the
// admin port of its enforcers as soon as the policy controller publishes
// it, so that an edit is in force in about a second rather than at the
// kubelet's refresh of the ConfigMap volume, which stays the source of a
// pod that starts.
package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	statusdoc "github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/configpush"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

const (
	// DefaultWorkers is how many pushes are in flight at once.
	DefaultWorkers = 64
	// retryFirst and retryMax bound the wait before a failed push is
	// tried again (an enforcer starting, a pod without an IP yet).
	retryFirst, retryMax = 100 * time.Millisecond, 10 * time.Second
)

// AnswerFunc is told what an enforcer runs after a push (the status
// controller records it as if polled).
type AnswerFunc func(ctx context.Context, pod *corev1.Pod, addr string, status *statusdoc.Document)

// Pusher is the manager Runnable that pushes each namespace's published
// configuration to the enforcers of its injected pods: every pod that has
// not been given the latest revision with its current labels at its
// current address, one queue entry per pod, failures retried with backoff
// until the pod has it, goes, or a newer revision supersedes it.
type Pusher struct {
	// Pods reads the namespaces' pods (the manager's cache).
	Pods client.Reader
	// Secrets reads the admin Secrets, whose write token a push presents.
	Secrets client.Reader
	Client  *configpush.Client
	// Workers is how many pushes are in flight at once (0: DefaultWorkers).
	Workers int
	// OnAnswer, when set, is told every answer.
	OnAnswer AnswerFunc

	once  sync.Once
	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu         sync.Mutex
	namespaces map[string]published
	pods       map[types.UID]delivered
}

// published is a namespace's configuration to deliver.
type published struct {
	document []byte
	revision int64
}

// delivered is what a pod's enforcer was last found to hold.
type delivered struct {
	revision int64
	labels   string
	addr     string
}

func (p *Pusher) init() {
	p.once.Do(func() {
		p.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](retryFirst, retryMax),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "sluice-delivery"})
		p.namespaces = map[string]published{}
		p.pods = map[types.UID]delivered{}
	})
}

// NeedLeaderElection: only the leader publishes, so only it pushes.
func (p *Pusher) NeedLeaderElection() bool { return true }

// Publish has document, of revision, pushed to every injected pod of the
// namespace that does not run it yet. A revision lower than one published
// before is ignored: enforcers would refuse it.
func (p *Pusher) Publish(ctx context.Context, namespace string, document []byte, revision int64) error {
	p.init()
	p.mu.Lock()
	if cur, ok := p.namespaces[namespace]; ok && revision < cur.revision {
		p.mu.Unlock()
		return nil
	}
	p.namespaces[namespace] = published{document: document, revision: revision}
	p.mu.Unlock()
	var pods corev1.PodList
	if err := p.Pods.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("list pods in %s: %w", namespace, err)
	}
	for i := range pods.Items {
		if pod := &pods.Items[i]; target(pod) && p.needs(pod) {
			p.queue.Add(client.ObjectKeyFromObject(pod))
		}
	}
	return nil
}

// Forget drops a namespace whose ConfigMap is gone.
func (p *Pusher) Forget(namespace string) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.namespaces, namespace)
}

// Observed is told what a pod's enforcer reported otherwise (a poll): an
// enforcer on an older revision than published (restarted from a file
// the kubelet had not refreshed) is pushed to again.
func (p *Pusher) Observed(pod *corev1.Pod, status *statusdoc.Document) {
	p.init()
	p.mu.Lock()
	want, ok := p.namespaces[pod.Namespace]
	stale := ok && status != nil && status.Config.Revision < want.revision
	if stale {
		delete(p.pods, pod.UID)
	}
	p.mu.Unlock()
	if stale && target(pod) {
		p.queue.Add(client.ObjectKeyFromObject(pod))
	}
}

// target says whether the pod runs an enforcer to push to.
func target(pod *corev1.Pod) bool {
	return inject.HasEnforcer(pod) && pod.DeletionTimestamp.IsZero() &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// needs says whether the pod's enforcer lacks its namespace's revision,
// its labels or was given them at another address.
func (p *Pusher) needs(pod *corev1.Pod) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	want, ok := p.namespaces[pod.Namespace]
	if !ok {
		return false
	}
	got, ok := p.pods[pod.UID]
	return !ok || got != delivered{revision: want.revision, labels: labelsKey(pod), addr: AdminAddress(pod)}
}

// Start pushes until ctx ends.
func (p *Pusher) Start(ctx context.Context) error {
	p.init()
	workers := p.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for p.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	p.queue.ShutDown()
	wg.Wait()
	return nil
}

// next pushes to one queued pod; false once the queue is shut down.
func (p *Pusher) next(ctx context.Context) bool {
	key, shutdown := p.queue.Get()
	if shutdown {
		return false
	}
	defer p.queue.Done(key)
	retry, err := p.push(ctx, key)
	switch {
	case retry:
		if err != nil {
			logf.FromContext(ctx).WithName("delivery").V(1).Info("push failed; retrying", "pod", key, "error", err.Error())
		}
		p.queue.AddRateLimited(key)
	default:
		p.queue.Forget(key)
	}
	return true
}

// push delivers the namespace's configuration to the pod of key if it
// needs it; retry says to try again later.
func (p *Pusher) push(ctx context.Context, key types.NamespacedName) (retry bool, err error) {
	pod := &corev1.Pod{}
	if err := p.Pods.Get(ctx, key, pod); err != nil {
		return !apierrors.IsNotFound(err), err
	}
	if !target(pod) {
		p.forgetPod(pod.UID)
		return false, nil
	}
	p.mu.Lock()
	want, ok := p.namespaces[pod.Namespace]
	p.mu.Unlock()
	if !ok || !p.needs(pod) {
		return false, nil
	}
	addr := AdminAddress(pod)
	if addr == "" {
		return true, nil // no IP yet: its enforcer reads the file when it starts
	}
	token, err := writeToken(ctx, p.Secrets, pod)
	if err != nil || token == "" {
		return true, err
	}
	ctx, cancel := context.WithTimeout(ctx, configpush.DefaultTimeout)
	defer cancel()
	answer, err := p.Client.Push(ctx, addr, token, want.document, pod.Labels)
	if err != nil && !errors.Is(err, configpush.ErrNotServed) {
		return true, err
	}
	p.mu.Lock()
	p.pods[pod.UID] = delivered{revision: want.revision, labels: labelsKey(pod), addr: addr}
	p.mu.Unlock()
	if answer != nil && p.OnAnswer != nil {
		p.OnAnswer(ctx, pod, addr, &answer.Status)
	}
	return false, nil
}

func (p *Pusher) forgetPod(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pods, uid)
}

// AdminAddress is host:port of the pod's enforcer admin listener, empty
// while the pod has no IP or its enforcer no admin port.
func AdminAddress(pod *corev1.Pod) string {
	c := inject.EnforcerContainer(pod)
	if c == nil || pod.Status.PodIP == "" {
		return ""
	}
	for _, port := range c.Ports {
		if port.Name == wellknown.AdminPortName {
			return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port.ContainerPort)))
		}
	}
	return ""
}

// writeToken is the token the pod's enforcer takes for writes: the write
// Secret's, or the read Secret's for a pod injected before the two were
// split (its enforcer has the one token).
func writeToken(ctx context.Context, secrets client.Reader, pod *corev1.Pod) (string, error) {
	name := wellknown.AdminWriteSecretName
	if !inject.MountsWriteToken(pod) {
		name = wellknown.AdminSecretName
	}
	secret := &corev1.Secret{}
	err := secrets.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read Secret %s/%s: %w", pod.Namespace, name, err)
	}
	return string(secret.Data[wellknown.AdminTokenKey]), nil
}

func labelsKey(pod *corev1.Pod) string {
	b, _ := json.Marshal(pod.Labels) // map keys are sorted
	return string(b)
}
