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

// DefaultFailureMode is the failure mode of a policy that sets none when the
// operator sets no other (sluice-manager --default-failure-mode); the CRD
// leaves the field empty so that the operator's choice applies.
const DefaultFailureMode = FailureModeOpen

// Defaults the CRD schema applies. ApplyDefaults applies the same values to
// policies that never went through an API server (the compiler's input in
// tests); the envtest suite checks that both agree. The enforcer's
// --policy-file applies the CRD's own defaults (internal/policyfile).
const (
	DefaultMode             = ModeEnforce
	DefaultUpstreamProtocol = UpstreamProtocolHTTP1
	DefaultTimeout          = 50 * time.Millisecond
	DefaultResponseHeaders  = ResponseHeadersBoth
	DefaultStorageSecretKey = "url"
	DefaultAlgorithm        = AlgorithmTokenBucket
	DefaultCost             = int32(1)
	DefaultAPIKeyHeader     = "X-API-Key"
	DefaultJWTHeader        = "Authorization"
	DefaultKeySetKey        = "jwks.json"
)

// DefaultIdentity is the identity of rules when neither the rule nor the
// policy sets one: every client IP address is a tenant, no proxy is trusted
// and budgets are not partitioned.
func DefaultIdentity() Identity {
	return Identity{Sources: []IdentitySource{{ClientIP: &ClientIPSource{}}}}
}

// IdentityFor returns the identity that applies to rule: its own, else the
// policy's, else DefaultIdentity. A rule's identity replaces the policy's as a
// whole; the two are never merged.
func (s *RateLimitPolicySpec) IdentityFor(rule *Rule) Identity {
	switch {
	case rule.Identity != nil:
		return *rule.Identity
	case s.Identity != nil:
		return *s.Identity
	default:
		return DefaultIdentity()
	}
}

// UpstreamProtocolOrDefault is spec.upstreamProtocol, or its default for a
// policy that never went through an API server.
func (s *RateLimitPolicySpec) UpstreamProtocolOrDefault() UpstreamProtocol {
	if s.UpstreamProtocol == "" {
		return DefaultUpstreamProtocol
	}
	return s.UpstreamProtocol
}

// ApplyDefaults sets every field the CRD schema defaults and that is unset.
func (p *RateLimitPolicy) ApplyDefaults() {
	p.Spec.ApplyDefaults()
}

// ApplyDefaults sets every field the CRD schema defaults and that is unset.
func (s *RateLimitPolicySpec) ApplyDefaults() {
	if s.Mode == "" {
		s.Mode = DefaultMode
	}
	if s.UpstreamProtocol == "" {
		s.UpstreamProtocol = DefaultUpstreamProtocol
	}
	if s.Timeout == nil {
		s.Timeout = &metav1.Duration{Duration: DefaultTimeout}
	}
	if s.ResponseHeaders == "" {
		s.ResponseHeaders = DefaultResponseHeaders
	}
	if ref := s.StorageSecret(); ref != nil && ref.Key == "" {
		ref.Key = DefaultStorageSecretKey
	}
	if s.Storage != nil && s.Storage.Consistency == "" {
		s.Storage.Consistency = ConsistencyAsync
	}
	s.Identity.applyDefaults()
	if s.Tiers != nil && s.Tiers.Source.JWTClaim != nil {
		s.Tiers.Source.JWTClaim.applyDefaults()
	}
	for i := range s.Rules {
		s.Rules[i].applyDefaults()
	}
}

func (r *Rule) applyDefaults() {
	if r.Algorithm == "" {
		r.Algorithm = DefaultAlgorithm
	}
	if r.Cost == 0 {
		r.Cost = DefaultCost
	}
	if r.Leasing == "" {
		r.Leasing = LeasingAuto
	}
	r.Identity.applyDefaults()
	r.Ban.applyDefaults()
}

func (id *Identity) applyDefaults() {
	if id == nil {
		return
	}
	for i := range id.Sources {
		src := &id.Sources[i]
		if src.APIKey != nil && src.APIKey.Header == "" {
			src.APIKey.Header = DefaultAPIKeyHeader
		}
		if src.JWTClaim != nil {
			src.JWTClaim.applyDefaults()
		}
	}
}

func (c *JWTClaimSource) applyDefaults() {
	if c.Header == "" {
		c.Header = DefaultJWTHeader
	}
	if c.Keys == nil {
		return
	}
	for _, ref := range []*KeySetReference{c.Keys.SecretRef, c.Keys.ConfigMapRef} {
		if ref != nil && ref.Key == "" {
			ref.Key = DefaultKeySetKey
		}
	}
}
