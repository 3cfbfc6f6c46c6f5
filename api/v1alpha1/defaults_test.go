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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestApplyDefaultsFillsUnsetFields(t *testing.T) {
	g := NewWithT(t)
	policy := RateLimitPolicy{Spec: RateLimitPolicySpec{
		Storage:  &Storage{SecretRef: &SecretKeyReference{Name: "redis"}},
		Identity: &Identity{Sources: []IdentitySource{{APIKey: &APIKeySource{}}, {JWTClaim: &JWTClaimSource{Claim: "sub"}}}},
		Tiers:    &Tiers{Source: TierSource{JWTClaim: &JWTClaimSource{Claim: "plan"}}, Default: "free"},
		Rules: []Rule{
			{Name: "api", Limits: []Limit{limit("", 60, time.Minute)}},
			{Name: "exports", Identity: &Identity{Sources: []IdentitySource{{JWTClaim: &JWTClaimSource{Claim: "org"}}}}},
		},
	}}

	policy.ApplyDefaults()

	spec := policy.Spec
	g.Expect(spec.Mode).To(Equal(ModeEnforce))
	g.Expect(spec.UpstreamProtocol).To(Equal(UpstreamProtocolHTTP1))
	g.Expect(spec.FailureMode).To(BeEmpty(), "left to the operator's default")
	g.Expect(spec.Timeout).To(Equal(&metav1.Duration{Duration: 50 * time.Millisecond}))
	g.Expect(spec.ResponseHeaders).To(Equal(ResponseHeadersBoth))
	g.Expect(spec.Storage.SecretRef.Key).To(Equal("url"))
	g.Expect(spec.Identity.Sources[0].APIKey.Header).To(Equal("X-API-Key"))
	g.Expect(spec.Identity.Sources[1].JWTClaim.Header).To(Equal("Authorization"))
	g.Expect(spec.Tiers.Source.JWTClaim.Header).To(Equal("Authorization"))
	for _, rule := range spec.Rules {
		g.Expect(rule.Algorithm).To(Equal(AlgorithmTokenBucket))
		g.Expect(rule.Cost).To(BeEquivalentTo(1))
		g.Expect(rule.Leasing).To(Equal(LeasingAuto))
	}
	g.Expect(spec.Rules[1].Identity.Sources[0].JWTClaim.Header).To(Equal("Authorization"))
}

func TestApplyDefaultsKeepsSetFields(t *testing.T) {
	g := NewWithT(t)
	spec := RateLimitPolicySpec{
		Mode:             ModeDryRun,
		UpstreamProtocol: UpstreamProtocolH2C,
		FailureMode:      FailureModeClosed,
		Timeout:          &metav1.Duration{Duration: 200 * time.Millisecond},
		ResponseHeaders:  ResponseHeadersNone,
		Storage:          &Storage{SecretRef: &SecretKeyReference{Name: "redis", Key: "address"}, Consistency: ConsistencyReplicated},
		Rules:            []Rule{{Name: "login", Algorithm: AlgorithmFixedWindow, Cost: 5, Leasing: LeasingOff}},
	}
	want := *spec.DeepCopy()

	spec.ApplyDefaults()

	g.Expect(spec).To(Equal(want))
}

func TestUpstreamProtocolOrDefault(t *testing.T) {
	g := NewWithT(t)
	g.Expect((&RateLimitPolicySpec{}).UpstreamProtocolOrDefault()).To(Equal(UpstreamProtocolHTTP1))
	g.Expect((&RateLimitPolicySpec{UpstreamProtocol: UpstreamProtocolH2C}).UpstreamProtocolOrDefault()).To(Equal(UpstreamProtocolH2C))
}

func TestIdentityFor(t *testing.T) {
	policyIdentity := &Identity{Sources: []IdentitySource{{Header: &HeaderSource{Name: "X-Tenant-ID"}}}}
	ruleIdentity := &Identity{
		Sources:     []IdentitySource{{Shared: &SharedSource{}}},
		PartitionBy: []PartitionKey{PartitionByPath},
	}

	tests := []struct {
		name   string
		policy *Identity
		rule   *Identity
		want   Identity
	}{
		{"nothing set: every client IP is a tenant", nil, nil, Identity{Sources: []IdentitySource{{ClientIP: &ClientIPSource{}}}}},
		{"policy identity", policyIdentity, nil, *policyIdentity},
		{"rule identity replaces the policy's as a whole", policyIdentity, ruleIdentity, *ruleIdentity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := RateLimitPolicySpec{Identity: tt.policy}
			g.Expect(spec.IdentityFor(&Rule{Name: "r", Identity: tt.rule})).To(Equal(tt.want))
		})
	}
}
