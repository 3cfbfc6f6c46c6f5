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

// StatusOptions chooses what the policy's status reports beyond the
// defaults.
type StatusOptions struct {
	// TopTenants lists in status.topTenants, per rule, the tenants with the
	// most requests and the most refusals (a handful each), refreshed with
	// the status. Off by default: anyone who may get the policy reads them.
	// API keys and JWT claims appear as "sha256:<hex>", client IPs and
	// header values as they are.
	// +optional
	TopTenants bool `json:"topTenants,omitempty"`
}

// TopTenantsPerRule is how many tenants status.topTenants lists per rule
// and kind.
const TopTenantsPerRule = 5

// RuleTopTenants are one rule's heaviest and most refused tenants.
type RuleTopTenants struct {
	// Rule is the rule's name.
	Rule string `json:"rule"`
	// Heaviest are the tenants with the most requests, most first.
	// +kubebuilder:validation:MaxItems=5
	// +optional
	Heaviest []TenantCount `json:"heaviest,omitempty"`
	// Refused are the tenants with the most refused requests, most first.
	// +kubebuilder:validation:MaxItems=5
	// +optional
	Refused []TenantCount `json:"refused,omitempty"`
}

// TenantCount is one tenant and its count, an estimate from bounded
// sketches: at most a sketch's error above the truth.
type TenantCount struct {
	// Tenant is the tenant as overrides name it, API keys and JWT claims
	// hashed.
	// +kubebuilder:validation:MaxLength=140
	Tenant string `json:"tenant"`
	// Count is the estimated number of requests.
	Count int64 `json:"count"`
}
