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
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// eventAction is the action of the policy controller's Events.
const eventAction = "Compile"

// statusPatch remembers the policies of a namespace as they were read, so
// that one deferred call sends each one's status changes, and only those.
type statusPatch struct {
	// action is the action of the Events recorded on save.
	action   string
	policies []*v1alpha1.RateLimitPolicy
	before   map[*v1alpha1.RateLimitPolicy]*v1alpha1.RateLimitPolicy
	events   map[*v1alpha1.RateLimitPolicy][]*statusEvent
}

func newStatusPatch(policies []*v1alpha1.RateLimitPolicy, action string) *statusPatch {
	p := &statusPatch{
		action:   action,
		policies: policies,
		before:   make(map[*v1alpha1.RateLimitPolicy]*v1alpha1.RateLimitPolicy, len(policies)),
		events:   map[*v1alpha1.RateLimitPolicy][]*statusEvent{},
	}
	for _, policy := range policies {
		p.before[policy] = policy.DeepCopy()
	}
	return p
}

// recordOnSave records event on policy once its status is saved, so that a
// transition whose patch fails (and is retried) is announced once. Events
// of one pass (Ready and Throttled transitions) are recorded in order.
func (p *statusPatch) recordOnSave(policy *v1alpha1.RateLimitPolicy, event *statusEvent) {
	if event != nil {
		p.events[policy] = append(p.events[policy], event)
	}
}

// apply patches the status of every policy that changed. The patch carries
// the resourceVersion it was computed from: if the policy changed meanwhile
// (a cache that has not seen the last patch yet, another writer of its
// status), the patch is refused rather than overwrite newer conditions, and
// conflict is true: the namespace needs another pass, which is no error.
func (p *statusPatch) apply(ctx context.Context, c client.Client, events recorder.EventRecorder) (conflict bool, _ error) {
	var errs []error
	for _, policy := range p.policies {
		before := p.before[policy]
		if equality.Semantic.DeepEqual(before.Status, policy.Status) {
			continue
		}
		err := c.Status().Patch(ctx, policy, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		switch {
		case apierrors.IsNotFound(err):
			continue // deleted meanwhile: its deletion reconciles the namespace again
		case apierrors.IsConflict(err):
			conflict = true
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("patch status of RateLimitPolicy %s/%s: %w", policy.Namespace, policy.Name, err))
			continue
		}
		for _, e := range p.events[policy] {
			if events != nil {
				recordEvent(events, policy, e.Type, e.Reason, p.action, e.Note)
			}
		}
	}
	return conflict, errors.Join(errs...)
}
