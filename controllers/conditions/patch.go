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

package conditions

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// Event is an Event to record once the status that caused it is saved.
type Event struct {
	Type, Reason, Note string
}

// Patch remembers the policies of a namespace as they were read, so that
// one deferred call sends each one's changes to the part of the status its
// owner writes, and only those: a condition of another owner is sent as it
// was read, whatever the owner's controller did to it in memory.
type Patch struct {
	owner    Owner
	policies []*v1alpha1.RateLimitPolicy
	before   map[*v1alpha1.RateLimitPolicy]*v1alpha1.RateLimitPolicy
	events   map[*v1alpha1.RateLimitPolicy][]*Event
}

// NewPatch takes a copy of each of policies, as read, for owner.
func NewPatch(owner Owner, policies []*v1alpha1.RateLimitPolicy) *Patch {
	p := &Patch{
		owner:    owner,
		policies: policies,
		before:   make(map[*v1alpha1.RateLimitPolicy]*v1alpha1.RateLimitPolicy, len(policies)),
		events:   map[*v1alpha1.RateLimitPolicy][]*Event{},
	}
	for _, policy := range policies {
		p.before[policy] = policy.DeepCopy()
	}
	return p
}

// Policies are the policies whose status the owner sets before Apply.
func (p *Patch) Policies() []*v1alpha1.RateLimitPolicy {
	return p.policies
}

// RecordOnSave records event on policy once its status is saved, so that a
// transition whose patch fails (and is retried) is announced once. Events
// of one pass (Ready and Throttled transitions) are recorded in order.
func (p *Patch) RecordOnSave(policy *v1alpha1.RateLimitPolicy, event *Event) {
	if event != nil {
		p.events[policy] = append(p.events[policy], event)
	}
}

// Apply patches the owner's part of the status of every policy where it
// changed. The patch carries the resourceVersion it was computed from: if
// the policy changed meanwhile (a cache that has not seen the last patch
// yet, another owner's patch), the patch is refused rather than send
// conditions of the other owner older than the stored ones, and conflict
// is true: the namespace needs another pass, which is no error.
func (p *Patch) Apply(ctx context.Context, c client.Client, events recorder.EventRecorder) (conflict bool, _ error) {
	var errs []error
	for _, policy := range p.policies {
		before := p.before[policy]
		status := ownedStatus(p.owner, &before.Status, &policy.Status)
		if equality.Semantic.DeepEqual(before.Status, status) {
			continue
		}
		target := before.DeepCopy()
		target.Status = status
		err := c.Status().Patch(ctx, target, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
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
				RecordEvent(events, policy, e.Type, e.Reason, p.owner.EventAction, e.Note)
			}
		}
	}
	return conflict, errors.Join(errs...)
}

// ownedStatus is before with owner's part taken from after: its fields
// and its conditions, which keep their place in the list; the other
// owners' conditions stay as they were read.
func ownedStatus(owner Owner, before, after *v1alpha1.RateLimitPolicyStatus) v1alpha1.RateLimitPolicyStatus {
	status := *before.DeepCopy()
	owner.CopyStatus(&status, after.DeepCopy())
	status.Conditions = nil
	for _, c := range before.Conditions {
		if !owner.owns(c.Type) {
			status.Conditions = append(status.Conditions, c)
		} else if set := apimeta.FindStatusCondition(after.Conditions, c.Type); set != nil {
			status.Conditions = append(status.Conditions, *set)
		}
	}
	for _, c := range after.Conditions {
		if owner.owns(c.Type) && apimeta.FindStatusCondition(before.Conditions, c.Type) == nil {
			status.Conditions = append(status.Conditions, c)
		}
	}
	return status
}
