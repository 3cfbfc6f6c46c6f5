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

package compile

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

// redisURLEnvPrefix starts the name of every policy's Redis URL variable.
const redisURLEnvPrefix = "SLUICE_REDIS_URL_"

// RedisURLEnv is the environment variable that carries the Redis URL of the
// policy named policy, which the injector fills from its storage Secret. It
// is the name upper-cased with '-' and '.' as '_'. Policy names cannot hold
// '_', so names without '.' map one to one; a name with '.' gets a hash of
// the name appended, since a.b and a-b would otherwise share a variable.
func RedisURLEnv(policy string) string {
	env := redisURLEnvPrefix + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		default:
			return '_'
		}
	}, policy)
	if strings.ContainsFunc(policy, func(r rune) bool { return r != '-' && !isAlnum(r) }) {
		sum := sha256.Sum256([]byte(policy))
		env += "_" + strings.ToUpper(hex.EncodeToString(sum[:4]))
	}
	return env
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// policy converts a defaulted spec; it resolves every inheritance so the
// enforcer only looks values up.
func policy(p *v1alpha1.RateLimitPolicy, spec *v1alpha1.RateLimitPolicySpec, replicas int32, verify verifications) config.Policy {
	out := config.Policy{
		Name:            p.Name,
		UID:             string(p.UID),
		Generation:      p.Generation,
		Replicas:        replicas,
		Mode:            config.Mode(spec.Mode),
		FailureMode:     config.FailureMode(spec.FailureMode),
		Timeout:         config.Duration{Duration: spec.Timeout.Duration},
		ResponseHeaders: config.ResponseHeaders(spec.ResponseHeaders),
		Salt:            string(p.UID),
	}
	if rls := spec.RateLimitService; rls != nil {
		// The service has no upstream and writes no response headers:
		// Envoy does, from the statuses it answers.
		out.Domain = rls.Domain
		out.ResponseHeaders = config.HeadersNone
	} else {
		// UpstreamProtocol is written even when HTTP1, which empty also
		// means, so that the configuration says how its enforcers forward.
		out.Selector = labelSelector(spec.Selector)
		out.UpstreamPort = spec.UpstreamPort
		out.UpstreamProtocol = config.UpstreamProtocol(spec.UpstreamProtocol)
		out.TrustedProxies = slices.Clone(spec.TrustedProxies)
	}
	if out.Salt == "" {
		// Policies read from a file have no UID; their name is stable too.
		out.Salt = p.Namespace + "/" + p.Name
	}
	if spec.StorageSecret() != nil {
		out.RedisURLEnv = RedisURLEnv(p.Name)
	}
	if spec.Replicated() {
		out.Consistency = config.ConsistencyReplicated
	}
	defaultTier := ""
	var tiers []string
	if spec.Tiers != nil {
		defaultTier = spec.Tiers.Default
		out.Tiers = &config.Tiers{Source: tierSource(spec.Tiers.Source, verify), Default: defaultTier}
		tiers = spec.TierNames()
		if !slices.Contains(tiers, defaultTier) {
			tiers = append(tiers, defaultTier)
		}
	}
	out.Rules = make([]config.Rule, 0, len(spec.Rules))
	for i := range spec.Rules {
		out.Rules = append(out.Rules, rule(spec, &spec.Rules[i], tiers, defaultTier, verify))
	}
	return out
}

func rule(spec *v1alpha1.RateLimitPolicySpec, r *v1alpha1.Rule, tiers []string, defaultTier string, verify verifications) config.Rule {
	out := config.Rule{
		Name:     r.Name,
		Match:    match(r.Match),
		Identity: ruleIdentity(spec, r, verify),
	}
	if r.Exempt {
		out.Exempt = true
		return out
	}
	out.Algorithm = config.Algorithm(r.Algorithm)
	out.Cost = int64(r.Cost)
	if r.Leasing == v1alpha1.LeasingOff {
		// Auto is the wire format's default: configurations that do not
		// turn leasing off stay as they were, and so does their hash.
		out.Leasing = config.LeasingOff
	}
	// A tier no limit names resolves like the empty tier: untiered limits,
	// else the default tier's.
	out.Limits = limits(r.LimitsForTier("", defaultTier))
	if len(tiers) > 0 {
		out.TierLimits = make(map[string][]config.Limit, len(tiers))
		for _, tier := range tiers {
			out.TierLimits[tier] = limits(r.LimitsForTier(tier, defaultTier))
		}
	}
	for _, o := range spec.Overrides {
		if o.Rule == r.Name {
			out.Overrides = append(out.Overrides, config.Override{Tenant: o.Tenant, Limits: limits(o.Limits)})
		}
	}
	out.OnLimit = delay(r.OnLimit)
	out.Ban = ban(r.Ban)
	out.Adaptive = adaptive(r.Adaptive)
	out.ResponseCost = responseCost(r.ResponseCost)
	out.CountResponses = countResponses(r.CountResponses)
	return out
}

func match(m *v1alpha1.RequestMatch) config.Match {
	if m == nil {
		return config.Match{}
	}
	out := config.Match{Hosts: slices.Clone(m.Hosts)}
	for _, method := range m.Methods {
		out.Methods = append(out.Methods, string(method))
	}
	for _, p := range m.Paths {
		out.Paths = append(out.Paths, config.PathMatch{Exact: p.Exact, Prefix: p.Prefix, Glob: p.Glob})
	}
	for _, call := range m.GRPC {
		out.Paths = append(out.Paths, grpcPath(call))
	}
	for _, e := range m.Descriptors {
		out.Descriptor = append(out.Descriptor, config.DescriptorEntry{Key: e.Key, Value: e.Value})
	}
	return out
}

// grpcPath is the path match of a gRPC call's request path, /service/method:
// exact for one method, the service's prefix for all of them. The enforcer
// then matches gRPC calls as it matches any path.
func grpcPath(call v1alpha1.GRPCMatch) config.PathMatch {
	if call.Method == "" {
		return config.PathMatch{Prefix: "/" + call.Service + "/"}
	}
	return config.PathMatch{Exact: "/" + call.Service + "/" + call.Method}
}

// ruleIdentity is the identity of rule (spec.IdentityFor), but for a
// rule of a rateLimitService policy where neither it nor the policy sets
// one: then the whole descriptor names the tenant, each distinct set of
// values counting apart, as envoyproxy/ratelimit counts.
func ruleIdentity(spec *v1alpha1.RateLimitPolicySpec, rule *v1alpha1.Rule, verify verifications) config.Identity {
	if spec.RateLimitService != nil && rule.Identity == nil && spec.Identity == nil {
		return config.Identity{Sources: []config.Source{{Descriptor: &config.DescriptorSource{}}}}
	}
	return identity(spec.IdentityFor(rule), verify)
}

func identity(id v1alpha1.Identity, verify verifications) config.Identity {
	out := config.Identity{Sources: make([]config.Source, 0, len(id.Sources))}
	for _, s := range id.Sources {
		out.Sources = append(out.Sources, source(s, verify))
	}
	for _, k := range id.PartitionBy {
		out.PartitionBy = append(out.PartitionBy, config.PartitionKey(k))
	}
	return out
}

func source(s v1alpha1.IdentitySource, verify verifications) config.Source {
	var out config.Source
	switch {
	case s.Header != nil:
		out.Header = &config.HeaderSource{Name: s.Header.Name}
	case s.APIKey != nil:
		out.APIKey = &config.HeaderSource{Name: s.APIKey.Header}
	case s.JWTClaim != nil:
		out.JWTClaim = &config.JWTClaimSource{Claim: s.JWTClaim.Claim, Header: s.JWTClaim.Header, Verify: verify[s.JWTClaim]}
	case s.ClientIP != nil:
		out.ClientIP = &config.ClientIPSource{TrustedProxies: slices.Clone(s.ClientIP.TrustedProxies)}
	case s.Shared != nil:
		out.Shared = &struct{}{}
	case s.Descriptor != nil:
		out.Descriptor = &config.DescriptorSource{Key: s.Descriptor.Key}
	}
	return out
}

func tierSource(s v1alpha1.TierSource, verify verifications) config.Source {
	var out config.Source
	switch {
	case s.Header != nil:
		out.Header = &config.HeaderSource{Name: s.Header.Name}
	case s.JWTClaim != nil:
		out.JWTClaim = &config.JWTClaimSource{Claim: s.JWTClaim.Claim, Header: s.JWTClaim.Header, Verify: verify[s.JWTClaim]}
	case s.Descriptor != nil:
		out.Descriptor = &config.DescriptorSource{Key: s.Descriptor.Key}
	}
	return out
}

func limits(in []v1alpha1.Limit) []config.Limit {
	if len(in) == 0 {
		return nil
	}
	out := make([]config.Limit, 0, len(in))
	for _, l := range in {
		cl := config.Limit{Requests: l.Requests, Period: config.Duration{Duration: l.Period.Duration}, Concurrent: l.Concurrent}
		if l.Burst != nil {
			cl.Burst = *l.Burst
		}
		if c := l.Calendar; c != nil {
			cl.Calendar = &config.Calendar{Unit: config.CalendarUnit(c.Unit), TimeZone: c.TimeZone, WeekStart: string(c.WeekStart)}
		}
		out = append(out, cl)
	}
	return out
}

// labelSelector is s in the enforcer configuration's own type.
func labelSelector(s metav1.LabelSelector) config.LabelSelector {
	out := config.LabelSelector{MatchLabels: maps.Clone(s.MatchLabels)}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, config.LabelSelectorRequirement{
			Key: r.Key, Operator: string(r.Operator), Values: slices.Clone(r.Values),
		})
	}
	return out
}
