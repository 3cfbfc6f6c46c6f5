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

// Package conditions says which controller writes which part of a
// RateLimitPolicy's status, and saves each controller's part only: every
// condition has one writer. It also records the controllers' Events.
package conditions

import (
	"slices"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// Owner is a controller that writes a part of a RateLimitPolicy's status:
// the condition types listed, and the fields its CopyStatus copies. No two
// owners list one condition type.
type Owner struct {
	// Name is the controller's, for errors.
	Name string
	// Conditions are the condition types it writes.
	Conditions []string
	// EventAction is the action of the Events it records.
	EventAction string
	// CopyStatus copies the status fields it writes, other than
	// conditions, from src to dst.
	CopyStatus func(dst, src *v1alpha1.RateLimitPolicyStatus)
}

// Policy is the policy controller: it compiles the spec, so it says
// whether the current generation was accepted (Accepted), whether the user
// must act (Stalled) and whether publishing is being retried
// (Reconciling), and which generation that was.
var Policy = Owner{
	Name:        "policy controller",
	Conditions:  []string{v1alpha1.ConditionAccepted, v1alpha1.ConditionStalled, v1alpha1.ConditionReconciling},
	EventAction: "Compile",
	CopyStatus: func(dst, src *v1alpha1.RateLimitPolicyStatus) {
		dst.ObservedGeneration = src.ObservedGeneration
		dst.Algorithms = src.Algorithms
		dst.FailureMode = src.FailureMode
	},
}

// EnforcerStatus is the status controller: it polls the enforcers, so it
// says whether they all enforce the current generation (Ready, which
// follows the policy controller's Accepted) and whether adaptive rules
// scale their limits down (Throttled), with the counts behind them.
var EnforcerStatus = Owner{
	Name:        "status controller",
	Conditions:  []string{v1alpha1.ConditionReady, v1alpha1.ConditionThrottled},
	EventAction: "CheckEnforcers",
	CopyStatus: func(dst, src *v1alpha1.RateLimitPolicyStatus) {
		dst.Enforcers = src.Enforcers
		dst.Decisions = src.Decisions
		dst.Bans = src.Bans
		dst.EffectiveLimits = src.EffectiveLimits
		dst.TopTenants = src.TopTenants
	},
}

// owns says whether o writes conditions of type t.
func (o Owner) owns(t string) bool {
	return slices.Contains(o.Conditions, t)
}
