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

// Mode says whether a policy blocks requests or only reports what it would block.
// +kubebuilder:validation:Enum=Enforce;DryRun
type Mode string

const (
	// ModeEnforce answers 429 to requests over a limit.
	ModeEnforce Mode = "Enforce"
	// ModeDryRun forwards every request and counts the ones it would deny.
	ModeDryRun Mode = "DryRun"
)

// FailureMode says what the enforcer does when it cannot reach storage in time.
// +kubebuilder:validation:Enum=Open;Closed;LocalFallback
type FailureMode string

const (
	// FailureModeOpen lets requests through unlimited.
	FailureModeOpen FailureMode = "Open"
	// FailureModeClosed denies requests (503) until storage answers again.
	FailureModeClosed FailureMode = "Closed"
	// FailureModeLocalFallback limits in memory, each enforcer to its share of the limit.
	FailureModeLocalFallback FailureMode = "LocalFallback"
)

// ResponseHeaders selects which rate limit headers responses carry.
// +kubebuilder:validation:Enum=XRateLimit;IETF;Both;None
type ResponseHeaders string

const (
	// ResponseHeadersXRateLimit sends X-RateLimit-Limit, -Remaining and -Reset.
	ResponseHeadersXRateLimit ResponseHeaders = "XRateLimit"
	// ResponseHeadersIETF sends the RateLimit-Policy and RateLimit fields of
	// draft-ietf-httpapi-ratelimit-headers.
	ResponseHeadersIETF ResponseHeaders = "IETF"
	// ResponseHeadersBoth sends both sets.
	ResponseHeadersBoth ResponseHeaders = "Both"
	// ResponseHeadersNone sends no rate limit headers; 429 still carries Retry-After.
	ResponseHeadersNone ResponseHeaders = "None"
)

// UpstreamProtocol is how the enforcer speaks to the application.
// +kubebuilder:validation:Enum=HTTP1;H2C
type UpstreamProtocol string

const (
	// UpstreamProtocolHTTP1 forwards as HTTP/1.1, whatever the client spoke.
	UpstreamProtocolHTTP1 UpstreamProtocol = "HTTP1"
	// UpstreamProtocolH2C forwards as cleartext HTTP/2 with prior knowledge,
	// what gRPC servers speak.
	UpstreamProtocolH2C UpstreamProtocol = "H2C"
)

// RateLimitPolicySpec says which pods are limited, who is limited, where, how
// much, and what happens when storage is unavailable.
//
// Cross-field rules that need the whole spec (tiers) live here; those about
// one rule live on Rule. How overrides relate to their rules is checked by
// the compiler (internal/compile): at 10,000 overrides, relating each to the
// rules is beyond the cost budget of the API server's validation rules.
//
// +kubebuilder:validation:XValidation:rule="has(self.tiers) || self.rules.all(r, !has(r.limits) || r.limits.all(l, !has(l.tier)))",message="a limit names a tier but spec.tiers is not set: add spec.tiers to say where the tier of a request comes from, or remove tier from the limits",messageExpression="'limits of rule ' + self.rules.map(r, has(r.limits) && r.limits.exists(l, has(l.tier)) ? r.name : '-').filter(n, n != '-')[0] + ' name a tier but spec.tiers is not set: add spec.tiers to say where the tier of a request comes from, or remove tier from the limits'",fieldPath=".rules"
// +kubebuilder:validation:XValidation:rule="!has(self.tiers) || self.rules.all(r, !has(r.limits) || r.limits.exists(l, !has(l.tier) || l.tier == self.tiers.default))",message="a rule has limits for named tiers only and none for the default tier: add a limit for the default tier, or a limit without a tier, which then applies to every tier the rule does not name",messageExpression="'rule ' + self.rules.map(r, has(r.limits) && !r.limits.exists(l, !has(l.tier) || l.tier == self.tiers.default) ? r.name : '-').filter(n, n != '-')[0] + ' has limits for named tiers only and none for the default tier ' + self.tiers.default + ': add a limit for tier ' + self.tiers.default + ', or a limit without a tier, which then applies to every tier the rule does not name'",fieldPath=".rules"
// +kubebuilder:validation:XValidation:rule="!(has(self.selector) && has(self.rateLimitService))",message="selector and rateLimitService are both set, but a policy is applied either by the enforcer sidecar of the pods its selector selects or by the rate limit service that Envoy calls for rateLimitService.domain: remove one of them, or write one policy for each"
// +kubebuilder:validation:XValidation:rule="has(self.selector) || has(self.rateLimitService)",message="neither selector nor rateLimitService is set: set selector and upstreamPort to limit the requests that reach the selected pods through the enforcer sidecar, or rateLimitService.domain to answer the rate limit calls Envoy makes for that domain"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || has(self.upstreamPort)",message="upstreamPort is required with selector: set the port your application listens on, which the enforcer forwards allowed requests to"
// +kubebuilder:validation:XValidation:rule="!has(self.rateLimitService) || has(self.selector) || !has(self.upstreamPort)",message="upstreamPort is for the enforcer sidecar, which forwards requests to the application; with rateLimitService, Envoy forwards them: remove upstreamPort"
// +kubebuilder:validation:XValidation:rule="!has(self.rateLimitService) || !has(self.trustedProxies)",message="trustedProxies are for the enforcer sidecar, which reads forwarding headers; a rateLimitService policy sees only the descriptors Envoy sends: remove trustedProxies (Envoy's remote_address action sends the client address as Envoy trusts it)"
// +kubebuilder:validation:XValidation:rule="!has(self.rateLimitService) || self.rules.all(r, has(r.match) && has(r.match.descriptors))",message="a rule of a rateLimitService policy has no match.descriptors: add the descriptor entries it matches, such as descriptors: [{key: generic_key, value: checkout}]",messageExpression="'rule ' + self.rules.map(r, !(has(r.match) && has(r.match.descriptors)) ? r.name : '-').filter(n, n != '-')[0] + ' has no match.descriptors, but a rateLimitService policy matches the descriptors of the calls Envoy makes: add the entries the rule matches, such as descriptors: [{key: generic_key, value: checkout}]'",fieldPath=".rules"
// +kubebuilder:validation:XValidation:rule="!has(self.rateLimitService) || self.rules.all(r, !has(r.match) || (!has(r.match.hosts) && !has(r.match.methods) && !has(r.match.paths) && !has(r.match.grpc)))",message="a rule of a rateLimitService policy matches hosts, methods, paths or grpc, but the rate limit service sees only the descriptors Envoy sends, not the request: have Envoy's rate limit actions put what you match on into descriptor entries (request_headers, header_value_match) and match those in match.descriptors",messageExpression="'rule ' + self.rules.map(r, has(r.match) && (has(r.match.hosts) || has(r.match.methods) || has(r.match.paths) || has(r.match.grpc)) ? r.name : '-').filter(n, n != '-')[0] + ' of a rateLimitService policy matches hosts, methods, paths or grpc, but the rate limit service sees only the descriptors Envoy sends, not the request: have the rate limit actions of Envoy put what you match on into descriptor entries (request_headers, header_value_match) and match those in match.descriptors'",fieldPath=".rules"
// +kubebuilder:validation:XValidation:rule="has(self.rateLimitService) || self.rules.all(r, !has(r.match) || !has(r.match.descriptors))",message="a rule matches descriptors, which only the rate limit service receives from Envoy: set spec.rateLimitService instead of selector, or match requests with hosts, methods, paths or grpc",messageExpression="'rule ' + self.rules.map(r, has(r.match) && has(r.match.descriptors) ? r.name : '-').filter(n, n != '-')[0] + ' matches descriptors, which only the rate limit service receives from Envoy: set spec.rateLimitService instead of selector and upstreamPort, or match requests with hosts, methods, paths or grpc'",fieldPath=".rules"
// +kubebuilder:validation:XValidation:rule="!has(self.rateLimitService) || self.rules.all(r, !has(r.onLimit) || !has(r.onLimit.delay))",message="a rule of a rateLimitService policy has onLimit.delay, but Envoy waits only a short timeout for the answer of the rate limit service and cannot hold a call until capacity comes: remove onLimit.delay, so that calls over the limit are refused at once, or limit these requests with an enforcer sidecar policy (selector)",messageExpression="'rule ' + self.rules.map(r, has(r.onLimit) && has(r.onLimit.delay) ? r.name : '-').filter(n, n != '-')[0] + ' of a rateLimitService policy has onLimit.delay, but Envoy waits only a short timeout for the answer of the rate limit service and cannot hold a call until capacity comes: remove onLimit.delay, so that calls over the limit are refused at once, or limit these requests with an enforcer sidecar policy (selector)'",fieldPath=".rules"
// +kubebuilder:validation:XValidation:rule="!has(self.rateLimitService) || self.rules.all(r, !has(r.adaptive))",message="a rule of a rateLimitService policy is adaptive, but the rate limit service never sees the responses of the application, so it cannot follow their latency and error rate: remove adaptive, or limit these requests with an enforcer sidecar policy (selector)",messageExpression="'rule ' + self.rules.map(r, has(r.adaptive) ? r.name : '-').filter(n, n != '-')[0] + ' of a rateLimitService policy is adaptive, but the rate limit service never sees the responses of the application, so it cannot follow their latency and error rate: remove adaptive, or limit these requests with an enforcer sidecar policy (selector)'",fieldPath=".rules"
// +kubebuilder:validation:XValidation:rule="!has(self.rateLimitService) || self.rules.all(r, !has(r.responseCost) && !has(r.countResponses))",message="a rule of a rateLimitService policy sets responseCost or countResponses, but the rate limit service never sees the answers of the application: remove them, or limit these requests with an enforcer sidecar policy (selector)",messageExpression="'rule ' + self.rules.map(r, has(r.responseCost) || has(r.countResponses) ? r.name : '-').filter(n, n != '-')[0] + ' of a rateLimitService policy sets responseCost or countResponses, but the rate limit service never sees the answers of the application: remove them, or limit these requests with an enforcer sidecar policy (selector)'",fieldPath=".rules"
// +kubebuilder:validation:XValidation:rule="!has(self.rateLimitService) || ((!has(self.identity) || self.identity.sources.all(s, has(s.descriptor) || has(s.shared))) && self.rules.all(r, !has(r.identity) || r.identity.sources.all(s, has(s.descriptor) || has(s.shared))))",message="a rateLimitService policy finds tenants in the entries of the descriptors Envoy sends: use the identity sources descriptor (with the key of the entry that names the tenant) and shared; header, apiKey, jwtClaim and clientIP read the request, which the service does not see, so have Envoy send them as descriptor entries"
// +kubebuilder:validation:XValidation:rule="!has(self.rateLimitService) || ((!has(self.identity) || !has(self.identity.partitionBy)) && self.rules.all(r, !has(r.identity) || !has(r.identity.partitionBy)))",message="partitionBy splits budgets by the method, path or host of the request, which a rateLimitService policy does not see: remove partitionBy, and add the entries to split by to the rule's match.descriptors (an entry without a value counts each of its values apart)"
// +kubebuilder:validation:XValidation:rule="has(self.rateLimitService) || ((!has(self.identity) || !self.identity.sources.exists(s, has(s.descriptor))) && self.rules.all(r, !has(r.identity) || !r.identity.sources.exists(s, has(s.descriptor))))",message="the identity source descriptor reads the descriptors Envoy sends to the rate limit service, which an enforcer sidecar policy never receives: use header, apiKey, jwtClaim, clientIP or shared, or set spec.rateLimitService instead of selector and upstreamPort"
// +kubebuilder:validation:XValidation:rule="!has(self.tiers) || !has(self.rateLimitService) || has(self.tiers.source.descriptor)",message="a rateLimitService policy reads the tier from an entry of the descriptors Envoy sends: set tiers.source.descriptor.key to the key of that entry",fieldPath=".tiers.source"
// +kubebuilder:validation:XValidation:rule="!has(self.tiers) || has(self.rateLimitService) || !has(self.tiers.source.descriptor)",message="tiers.source.descriptor reads the descriptors Envoy sends to the rate limit service, which an enforcer sidecar policy never receives: read the tier from a header or a jwtClaim, or set spec.rateLimitService instead of selector and upstreamPort",fieldPath=".tiers.source"
// +kubebuilder:validation:XValidation:rule="!has(self.rateLimitService) || self.rules.all(r, r.algorithm != 'Concurrency')",message="a rule of a rateLimitService policy uses Concurrency, but the rate limit service never sees when a request ends, so it cannot hold its slots: use another algorithm, or limit these requests with an enforcer sidecar policy (selector)",messageExpression="'rule ' + self.rules.map(r, r.algorithm == 'Concurrency' ? r.name : '-').filter(n, n != '-')[0] + ' of a rateLimitService policy uses Concurrency, but the rate limit service never sees when a request ends, so it cannot hold its slots: use another algorithm, or limit these requests with an enforcer sidecar policy (selector)'",fieldPath=".rules"
type RateLimitPolicySpec struct {
	// Selector selects the pods of this policy's namespace whose traffic is
	// limited. The enforcer sidecar is injected into every selected pod of a
	// namespace labelled sluice.dev/injection=enabled. It must not be empty:
	// an empty selector would select every pod of the namespace. Set
	// exactly one of selector (with upstreamPort) and rateLimitService.
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="selector is empty and would select every pod of the namespace: add matchLabels or matchExpressions"
	// +optional
	Selector metav1.LabelSelector `json:"selector,omitzero"`

	// RateLimitService makes this a policy of the rate limit service that
	// Envoy calls (envoy.service.ratelimit.v3), not of an enforcer sidecar:
	// its rules match the descriptors of Envoy's calls for the domain, and
	// it selects no pods. Set exactly one of selector and rateLimitService.
	// +optional
	RateLimitService *RateLimitService `json:"rateLimitService,omitempty"`

	// UpstreamPort is the port of the application container that the enforcer
	// forwards allowed requests to, on 127.0.0.1. Point your Service's
	// targetPort at the enforcer's named port sluice-http instead. It cannot
	// be one of the enforcer's own default ports (15080, 15081, 9902): the
	// enforcer would forward to itself. An enforcer takes the port when its
	// pod starts: after a change, Ready is False (RestartRequired) until
	// the selected pods are restarted.
	// Required with selector; a rateLimitService policy has none.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:validation:XValidation:rule="self != 15080",message="upstreamPort 15080 is the enforcer proxy port (sluice-http), so it would forward every request to itself: set the port your application listens on"
	// +kubebuilder:validation:XValidation:rule="self != 15081",message="upstreamPort 15081 is the enforcer admin port (sluice-admin), so it would forward every request to itself: set the port your application listens on"
	// +kubebuilder:validation:XValidation:rule="self != 9902",message="upstreamPort 9902 is the enforcer debug port, so it would forward every request to itself: set the port your application listens on"
	// +optional
	UpstreamPort int32 `json:"upstreamPort,omitempty"`

	// UpstreamProtocol is how the enforcer forwards to upstreamPort: HTTP1
	// (HTTP/1.1) or H2C (cleartext HTTP/2 with prior knowledge, what gRPC
	// servers speak). Clients may speak HTTP/1.1 or HTTP/2 to the enforcer
	// either way; it translates. Policies that select the same pod must
	// agree on it, as on upstreamPort.
	// +kubebuilder:default=HTTP1
	// +optional
	UpstreamProtocol UpstreamProtocol `json:"upstreamProtocol,omitempty"`

	// TrustedProxies are the CIDRs of the ingress controllers, load balancers
	// and proxies that connect to the selected pods. The forwarding headers
	// of a request from one of them (X-Forwarded-For, -Host, -Proto, -Port,
	// -Prefix, X-Real-IP, Forwarded) reach the application as sent, this hop
	// appended to X-Forwarded-For. From any other peer they are replaced by
	// what the enforcer saw, since any client can write them. The
	// trustedProxies of clientIP identity sources are trusted too. Name your
	// ingress controller's pod range, never a whole cluster range such as
	// 10.0.0.0/8: every pod in it could then forge its client address.
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="self.all(c, isCIDR(c))",messageExpression="'trustedProxies must be CIDRs such as 10.42.0.0/24 or fd00::/64 (use /32 or /128 for one address), not ' + self.filter(c, !isCIDR(c))[0]"
	// +optional
	TrustedProxies []string `json:"trustedProxies,omitempty"`

	// Mode is Enforce (answer 429 to requests over a limit) or DryRun (forward
	// every request; count would-be denials in headers, metrics and status).
	// +kubebuilder:default=Enforce
	// +optional
	Mode Mode `json:"mode,omitempty"`

	// FailureMode says what happens when storage (Redis) does not answer within
	// timeout: Open lets requests through, Closed answers 503, LocalFallback
	// limits in memory with each enforcer allowing its share of every limit
	// (the limit divided by the number of enforcers). Unset means the
	// operator's default: sluice-manager's --default-failure-mode, Open
	// unless the platform team changed it.
	// +optional
	FailureMode FailureMode `json:"failureMode,omitempty"`

	// Status chooses what the policy's status reports beyond the
	// defaults (toptenants_types.go).
	// +optional
	Status *StatusOptions `json:"status,omitempty"`

	// Timeout is the time budget for one storage round trip, a Go duration
	// between 1ms and 1s such as 50ms. When it runs out, failureMode applies.
	// +kubebuilder:default="50ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) >= duration('1ms') && duration(self) <= duration('1s')",message="timeout must be a duration between 1ms and 1s, for example 50ms"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// ResponseHeaders chooses the rate limit headers of responses: XRateLimit
	// (X-RateLimit-Limit, -Remaining, -Reset), IETF (RateLimit-Policy and
	// RateLimit), Both, or None. Denied responses always carry Retry-After.
	// +kubebuilder:default=Both
	// +optional
	ResponseHeaders ResponseHeaders `json:"responseHeaders,omitempty"`

	// Storage is where counters live. When omitted, the operator's default
	// Redis is used.
	// +optional
	Storage *Storage `json:"storage,omitempty"`

	// Identity says who is limited: each tenant gets its own budget. When
	// omitted, every client IP address is a tenant (the TCP peer address; no
	// proxy is trusted) and requests are not partitioned; in a
	// rateLimitService policy, each distinct descriptor (the values of its
	// entries) is a tenant.
	// +optional
	Identity *Identity `json:"identity,omitempty"`

	// Tiers gives each request a tier (a plan such as free or premium) so that
	// limits can differ per tier. Required when any limit names a tier.
	// +optional
	Tiers *Tiers `json:"tiers,omitempty"`

	// Rules say which requests are limited and how much. Every rule that
	// matches a request applies, and the request is denied if any of them
	// denies it; a request that matches an exempt rule is never limited by
	// this policy.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Rules []Rule `json:"rules"`

	// Overrides replace a rule's limits for one tenant, for example a customer
	// with a bigger contract; one per tenant and rule (the operator checks).
	// Atomic, not a map keyed by tenant and rule: server-side apply would
	// record each key in managedFields, which doubles a policy of 10,000
	// overrides past what etcd stores in one object.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +optional
	Overrides []Override `json:"overrides,omitempty"`
}

// RateLimitService makes a policy one of the rate limit service, which
// answers Envoy's rate limit calls (envoy.service.ratelimit.v3) for one
// domain.
type RateLimitService struct {
	// Domain is the domain of the calls this policy answers: the domain of
	// Envoy's rate limit filter (envoy.filters.http.ratelimit) or of its
	// rate limit actions. One policy of a namespace holds a domain: of two
	// naming the same, the one created later is not accepted.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	Domain string `json:"domain"`
}

// Storage says where an enforcer keeps its counters, and how safely.
type Storage struct {
	// SecretRef names a Secret of the policy's namespace holding the Redis URL:
	// redis://, rediss:// (TLS), or a Sentinel or Cluster URL. When omitted,
	// the operator's default Redis is used.
	// +optional
	SecretRef *SecretKeyReference `json:"secretRef,omitempty"`

	// Consistency says when a decision's count is safe. Async (the
	// default): once the primary has it; Redis replicates asynchronously,
	// so a failover to a replica can lose the counts of the last moments
	// and admit them again. Replicated: once one replica has it too (Redis
	// WAIT, within spec.timeout; a count no replica acknowledged in time
	// is a storage failure, decided by spec.failureMode). It costs a round
	// trip to the replica per decision and needs a Redis with a replica.
	// +kubebuilder:validation:Enum=Async;Replicated
	// +kubebuilder:default=Async
	// +optional
	Consistency Consistency `json:"consistency,omitempty"`
}

// StorageSecret is the Secret reference of spec.storage, nil when the
// policy uses the operator's default Redis.
func (s *RateLimitPolicySpec) StorageSecret() *SecretKeyReference {
	if s.Storage == nil {
		return nil
	}
	return s.Storage.SecretRef
}

// Replicated says a decision counts once a replica has it too.
func (s *RateLimitPolicySpec) Replicated() bool {
	return s.Storage != nil && s.Storage.Consistency == ConsistencyReplicated
}

// Consistency says when a decision's count is safe from a failover.
type Consistency string

const (
	// ConsistencyAsync counts a decision once the primary has it.
	ConsistencyAsync Consistency = "Async"
	// ConsistencyReplicated counts a decision once a replica has it too.
	ConsistencyReplicated Consistency = "Replicated"
)

// SecretKeyReference names one key of a Secret in the policy's namespace.
type SecretKeyReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key of the Secret's data that holds the value.
	// +kubebuilder:default=url
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// Override replaces the limits of one rule for one tenant.
// +kubebuilder:validation:XValidation:rule="!self.limits.exists(l, has(l.tier))",message="override limits apply to the tenant whatever its tier, so they cannot name a tier: remove tier"
// +kubebuilder:validation:XValidation:rule="!self.limits.all(l, !has(l.period) || l.period.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')) || self.limits.all(a, !has(a.period) || self.limits.exists_one(b, has(b.period) && duration(a.period) == duration(b.period)))",message="two limits of this override have the same period: keep one limit per period"
// +kubebuilder:validation:XValidation:rule="self.limits.all(a, !has(a.calendar) || self.limits.exists_one(b, has(b.calendar) && a.calendar.unit == b.calendar.unit))",message="two limits of this override have the same calendar unit: keep one limit per unit"
type Override struct {
	// Tenant is the identity value as the rule's identity resolves it: the
	// header or JWT claim value, or the client IP address. For apiKey sources
	// write sha256: followed by the lowercase hex SHA-256 of the key, never the
	// key itself.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Tenant string `json:"tenant"`

	// Rule is the name of the rule in spec.rules whose limits this replaces.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Rule string `json:"rule"`

	// Limits replace all of the rule's limits for this tenant, whatever its
	// tier; each must allow.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	Limits []Limit `json:"limits"`
}

// RateLimitPolicyStatus is what the operator and the enforcers report.
type RateLimitPolicyStatus struct {
	// ObservedGeneration is the generation of the spec that the operator last
	// compiled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Accepted (the spec compiled), Ready (every selected pod runs
	// an enforcer that loaded this generation and reaches storage), and,
	// only while true, Reconciling and Stalled.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Algorithms lists the algorithms the policy's rules use, comma-separated.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Algorithms string `json:"algorithms,omitempty"`

	// FailureMode is the failure mode in effect: spec.failureMode, or,
	// when the spec sets none, sluice-manager's --default-failure-mode.
	// +optional
	FailureMode FailureMode `json:"failureMode,omitempty"`

	// Enforcers counts the selected pods by the state of their enforcer.
	// +optional
	Enforcers EnforcerCounts `json:"enforcers,omitempty"`

	// Decisions totals the decisions of the enforcers since they started.
	// +optional
	Decisions DecisionCounts `json:"decisions,omitempty"`

	// Bans counts the tenants banned now by the policy's rules with a ban.
	// +optional
	Bans *BanStatus `json:"bans,omitempty"`
	// EffectiveLimits are the limits the enforcers apply to the adaptive
	// rules now, scaled by the application's health.
	// +listType=map
	// +listMapKey=rule
	// +kubebuilder:validation:MaxItems=64
	// +optional
	EffectiveLimits []EffectiveLimit `json:"effectiveLimits,omitempty"`
	// TopTenants are, per rule, the tenants with the most requests and the
	// most refusals over the last minute or two, from every enforcer; only
	// with spec.status.topTenants.
	// +listType=map
	// +listMapKey=rule
	// +kubebuilder:validation:MaxItems=64
	// +optional
	TopTenants []RuleTopTenants `json:"topTenants,omitempty"`
}

// EnforcerCounts counts the selected pods by the state of their enforcer.
type EnforcerCounts struct {
	// Selected pods match spec.selector and are running.
	// +optional
	Selected int32 `json:"selected,omitempty"`
	// Injected pods run the enforcer sidecar. Pods created before the policy
	// or in a namespace without sluice.dev/injection=enabled have none.
	// +optional
	Injected int32 `json:"injected,omitempty"`
	// Ready enforcers answer their readiness probe.
	// +optional
	Ready int32 `json:"ready,omitempty"`
	// UpToDate enforcers have loaded the current generation of this policy.
	// +optional
	UpToDate int32 `json:"upToDate,omitempty"`
	// Degraded enforcers cannot reach storage and apply spec.failureMode.
	// +optional
	Degraded int32 `json:"degraded,omitempty"`
	// Overloaded enforcers hold as much as their memory allows and refuse
	// new requests with 503.
	// +optional
	Overloaded int32 `json:"overloaded,omitempty"`
	// Summary is ready/selected, for example 2/3, as kubectl get shows it.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Summary string `json:"summary,omitempty"`
}

// DecisionCounts totals enforcer decisions.
type DecisionCounts struct {
	// Allowed requests were forwarded within their limits.
	// +optional
	Allowed int64 `json:"allowed,omitempty"`
	// Denied requests were answered 429 (Enforce mode).
	// +optional
	Denied int64 `json:"denied,omitempty"`
	// WouldDeny requests were over a limit but forwarded (DryRun mode).
	// +optional
	WouldDeny int64 `json:"wouldDeny,omitempty"`
	// Banned requests were answered 429 because their tenant was banned
	// from a rule (Enforce mode); they are not counted in Denied.
	// +optional
	Banned int64 `json:"banned,omitempty"`
}

// RateLimitPolicy limits the HTTP requests that reach the selected pods, per
// tenant and endpoint, with counters shared by every replica.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rlp,categories=sluice
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Algorithms",type=string,JSONPath=`.status.algorithms`
// +kubebuilder:printcolumn:name="Enforcers",type=string,JSONPath=`.status.enforcers.summary`,description="Ready enforcers / selected pods"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Failure Mode",type=string,JSONPath=`.status.failureMode`,priority=1,description="The failure mode in effect: spec.failureMode, or the manager's default"
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=`.spec.upstreamProtocol`,priority=1,description="How the enforcer forwards to the application: HTTP1 or H2C"
// +kubebuilder:printcolumn:name="Bans",type=integer,JSONPath=`.status.bans.active`,priority=1,description="Tenants banned now"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RateLimitPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired rate limiting.
	Spec RateLimitPolicySpec `json:"spec"`

	// Status is the observed state of the policy and its enforcers.
	// +optional
	Status RateLimitPolicyStatus `json:"status,omitempty"`
}

// RateLimitPolicyList is a list of RateLimitPolicy.
// +kubebuilder:object:root=true
type RateLimitPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RateLimitPolicy `json:"items"`
}
