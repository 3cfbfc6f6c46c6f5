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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Adaptive scales a rule's limits with the health of the application: the
// enforcers measure the responses to the requests the rule limits (their p90
// latency and 5xx share), agree through Redis on one factor per interval,
// and apply the rule's limits (and its tiers' and overrides') times that
// factor. While a target is exceeded the factor falls multiplicatively
// (x0.7), while the application is healthy it rises additively (+10
// percentage points), never below minimum nor above 100%.
// +kubebuilder:validation:XValidation:rule="!has(self.minimum) || !self.minimum.matches('^[0-9]+([.][0-9]+)?%$') || (double(self.minimum.substring(0, size(self.minimum) - 1)) >= 1.0 && double(self.minimum.substring(0, size(self.minimum) - 1)) <= 100.0)",message="adaptive.minimum must be between 1% and 100%, for example 25%"
type Adaptive struct {
	// Target is the health the application should keep: over either value
	// in an interval, the limits tighten.
	Target AdaptiveTarget `json:"target"`

	// Minimum is the lowest share of the configured limits the factor may
	// reach, a percentage between 1% and 100% such as 25%.
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]+([.][0-9]+)?%$')",message="adaptive.minimum must be a percentage such as 25%"
	// +optional
	Minimum string `json:"minimum,omitempty"`

	// Interval is how often the factor may step: every enforcer's
	// measurements of one interval decide one step, taken once for all
	// replicas. A Go duration between 1s and 10m.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="adaptive.interval must be a duration such as 10s or 1m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('10m') && duration(self).getMilliseconds() % 1000 == 0)",message="adaptive.interval must be a whole number of seconds between 1s and 10m"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// AdaptiveTarget is the application's health as the enforcers measure it
// on the responses to the rule's requests; at least one field is set.
// +kubebuilder:validation:XValidation:rule="has(self.latency) || has(self.errorRate)",message="adaptive.target needs latency, errorRate or both"
// +kubebuilder:validation:XValidation:rule="!has(self.errorRate) || !self.errorRate.matches('^[0-9]+([.][0-9]+)?%$') || (double(self.errorRate.substring(0, size(self.errorRate) - 1)) >= 0.1 && double(self.errorRate.substring(0, size(self.errorRate) - 1)) <= 100.0)",message="adaptive.target.errorRate must be between 0.1% and 100%, for example 5%"
type AdaptiveTarget struct {
	// Latency is the highest p90 response time: from forwarding the request
	// to the application's response head. A Go duration between 1ms and 60s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="adaptive.target.latency must be a duration such as 250ms or 1s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('1ms') && duration(self) <= duration('60s'))",message="adaptive.target.latency must be between 1ms and 60s"
	// +optional
	Latency *metav1.Duration `json:"latency,omitempty"`

	// ErrorRate is the highest share of 5xx responses, a percentage between
	// 0.1% and 100% such as 5%.
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]+([.][0-9]+)?%$')",message="adaptive.target.errorRate must be a percentage such as 5% or 0.5%"
	// +optional
	ErrorRate string `json:"errorRate,omitempty"`
}

// EffectiveLimit is the limit the enforcers apply to one window of an
// adaptive rule, as the latest enforcer reports say.
type EffectiveLimit struct {
	// Rule is the adaptive rule.
	Rule string `json:"rule"`
	// Factor is the share of the configured limits in force, such as 70%.
	Factor string `json:"factor"`
	// Requests per period the rule's untiered limits (or its first tier's)
	// admit now, one entry per window, as "70/1s".
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Limits []string `json:"limits,omitempty"`
	// Latency is the p90 latency measured in the last interval, across
	// replicas.
	// +optional
	Latency string `json:"latency,omitempty"`
	// ErrorRate is the share of 5xx responses in the last interval, across
	// replicas.
	// +optional
	ErrorRate string `json:"errorRate,omitempty"`
	// Throttled is set while the factor is below 100%.
	// +optional
	Throttled bool `json:"throttled,omitempty"`
}
