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

package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultBanForgetAfter is how long a tenant's ban level is remembered after
// its last ban ended, when a ban sets no forgetAfter.
const DefaultBanForgetAfter = 24 * time.Hour

// MaxBanDurations bounds the escalation levels of a ban.
const MaxBanDurations = 8

// Ban shuts a tenant out of a rule for a while once it keeps hitting the
// rule's limit: after.denials refusals within after.within start a ban of
// durations[0]; a ban that starts within forgetAfter of the end of the
// previous one lasts the next duration (the last one repeats). A banned
// tenant is refused every request the rule matches, 429 with a problem of
// type https://sluice.dev/problems/banned, until the ban ends.
type Ban struct {
	// After says how many refusals, within how long, start a ban.
	After BanTrigger `json:"after"`

	// Durations are how long the first, second, ... ban lasts, Go durations
	// between 1s and 744h (31 days) such as 5m, 1h or 24h; past the last
	// entry, the last one repeats.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:Type=string
	// +kubebuilder:validation:items:MaxLength=32
	Durations []metav1.Duration `json:"durations"`

	// ForgetAfter is how long after a ban ends the tenant's level is
	// remembered: a ban starting later is a first ban again. A Go duration
	// between 1s and 744h; 24h when omitted.
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +optional
	ForgetAfter *metav1.Duration `json:"forgetAfter,omitempty"`
}

// BanTrigger is the refusals that start a ban.
type BanTrigger struct {
	// Denials is how many requests of the tenant the rule must refuse.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Denials int32 `json:"denials"`

	// Within is the time those refusals must fall in, a Go duration between
	// 1s and 24h such as 1m.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	Within metav1.Duration `json:"within"`
}

func (b *Ban) applyDefaults() {
	if b != nil && b.ForgetAfter == nil {
		b.ForgetAfter = &metav1.Duration{Duration: DefaultBanForgetAfter}
	}
}

// ForgetAfterOrDefault is forgetAfter, or its default for a policy that
// never went through an API server.
func (b *Ban) ForgetAfterOrDefault() time.Duration {
	if b.ForgetAfter == nil {
		return DefaultBanForgetAfter
	}
	return b.ForgetAfter.Duration
}

// BanStatus counts a policy's bans in force.
type BanStatus struct {
	// Active is how many tenants are banned now, by any rule of the
	// policy, as counted in Redis when the enforcers were last polled.
	Active int64 `json:"active"`
}
