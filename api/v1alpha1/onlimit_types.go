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

// OnLimit says what a rule does with a request over its limit instead of
// refusing it at once.
type OnLimit struct {
	// Delay lets a request over the limit wait for capacity instead of
	// getting 429: when the capacity it needs comes within max, it is booked
	// for the request in Redis (nobody else gets it, on any replica) and
	// the request waits for it, then goes on. Beyond max the request is
	// refused as without a delay. TokenBucket and GCRA rules only.
	// +optional
	Delay *Delay `json:"delay,omitempty"`
}

// DefaultDelayMaxQueued is delay.maxQueued when unset.
const DefaultDelayMaxQueued = 100

// Delay bounds how long, and how many of a tenant's requests, wait for
// capacity.
type Delay struct {
	// Max is the longest a request waits for its capacity, a Go duration
	// between 1ms and 30s such as 500ms.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="max must be a duration such as 250ms or 2s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || (duration(self) >= duration('1ms') && duration(self) <= duration('30s'))",message="max must be between 1ms and 30s: a longer wait holds connections longer than clients and proxies usually wait"
	Max metav1.Duration `json:"max"`

	// MaxQueued is how many requests of one tenant may wait at once in each
	// enforcer (each replica of the application); more are decided as
	// without a delay: admitted if capacity is there now, refused
	// otherwise. Defaults to 100.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	MaxQueued *int32 `json:"maxQueued,omitempty"`
}
