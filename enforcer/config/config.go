// Package config is the enforcer's compiled configuration: the schema the
// operator writes to ConfigMap sluice-enforcer-config (one per namespace) and
// the enforcer reads, with its validation.
//
// The schema is versioned (Schema); within a version, fields are only added.
// It is deliberately explicit: the compiler (internal/compile) resolves every
// default and inheritance (a rule's identity, tiered limits, overrides) so
// the enforcer applies it without knowing the RateLimitPolicy API.
package config

import (
	"encoding/json"
	"fmt"
	"time"
)

// Schema identifies this version of the compiled configuration.
const Schema = "sluice.dev/enforcer-config/v1"

// Config is every policy of one namespace, compiled.
type Config struct {
	Schema    string `json:"schema"`
	Namespace string `json:"namespace"`
	// Revision orders the configurations of a namespace: the manager
	// raises it at every change and an enforcer applies only a newer one,
	// whether its file or a push brings it first. 0 (a configuration
	// written by hand or by sluice-policy-compile) is unordered.
	Revision int64    `json:"revision,omitempty"`
	Policies []Policy `json:"policies"`
}

// Policy is one compiled RateLimitPolicy.
type Policy struct {
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Generation int64  `json:"generation"`
	// Domain, when set, makes this a policy of the rate limit service
	// (cmd/ratelimit): its rules match the descriptors of Envoy's calls for
	// this domain (match.descriptor) instead of HTTP requests, and the
	// enforcer's proxy does not apply it (descriptor.go).
	Domain string `json:"domain,omitempty"`
	// Selector picks the pods (by their labels) whose enforcer applies the policy.
	Selector LabelSelector `json:"selector"`
	// Replicas is how many pods the policy selected when it was compiled;
	// under LocalFallback each enforcer admits 1/Replicas of every limit.
	Replicas     int32 `json:"replicas"`
	UpstreamPort int32 `json:"upstreamPort"`
	// UpstreamProtocol is how the enforcer speaks to the application;
	// empty (configurations written before it existed) means HTTP1.
	UpstreamProtocol UpstreamProtocol `json:"upstreamProtocol,omitempty"`
	// TrustedProxies are the CIDRs whose forwarding headers reach the
	// application as sent (spec.trustedProxies).
	TrustedProxies []string    `json:"trustedProxies,omitempty"`
	Mode           Mode        `json:"mode"`
	FailureMode    FailureMode `json:"failureMode"`
	Timeout        Duration    `json:"timeout"`
	// ResponseHeaders says which rate limit headers responses carry.
	ResponseHeaders ResponseHeaders `json:"responseHeaders"`
	// RedisURLEnv names the environment variable holding this policy's Redis
	// URL (injected from its storage Secret); empty means the enforcer's
	// default Redis.
	RedisURLEnv string `json:"redisURLEnv,omitempty"`
	// Consistency says when a decision's count is safe from a failover;
	// empty means Async.
	Consistency Consistency `json:"consistency,omitempty"`
	// Salt is mixed into every tenant hash of the policy, so the same API key
	// maps to unrelated Redis keys in different policies.
	Salt string `json:"salt"`
	// Tiers says where a request's tier comes from; nil means no tiers.
	Tiers *Tiers `json:"tiers,omitempty"`
	Rules []Rule `json:"rules"`
}

// Rule is one compiled rule: which requests, whose budget, how much.
type Rule struct {
	Name      string    `json:"name"`
	Match     Match     `json:"match"`
	Exempt    bool      `json:"exempt,omitempty"`
	Algorithm Algorithm `json:"algorithm,omitempty"`
	Cost      int64     `json:"cost,omitempty"`
	// Leasing is empty (LeasingAuto) or LeasingOff.
	Leasing Leasing `json:"leasing,omitempty"`
	// Identity is the rule's own identity, or the policy's when it has none.
	Identity Identity `json:"identity"`
	// Limits are the windows of a request whose tier has no entry in
	// TierLimits (every request, without tiers). Every window must admit it.
	Limits []Limit `json:"limits,omitempty"`
	// TierLimits are the windows of each tier the policy names, resolved by
	// the compiler (a tier's own limits, else the untiered ones, else the
	// default tier's), so the enforcer only looks up.
	TierLimits map[string][]Limit `json:"tierLimits,omitempty"`
	// Overrides replace the limits for named tenants (their identity as the
	// policy names it, before hashing), whatever their tier.
	Overrides []Override `json:"overrides,omitempty"`
	// OnLimit says what to do with a request over the limit instead of
	// refusing it at once; nil refuses it (delay.go).
	OnLimit *OnLimit `json:"onLimit,omitempty"`
	// Ban, when set, bans tenants that keep hitting the rule's limits.
	Ban *Ban `json:"ban,omitempty"`
	// Adaptive, when set, scales every window of the rule (tiers and
	// overrides too) by a factor that follows the application's health.
	Adaptive *Adaptive `json:"adaptive,omitempty"`
	// ResponseCost and CountResponses, when set, charge or give back when
	// the answer ends (response.go).
	ResponseCost   *ResponseCost   `json:"responseCost,omitempty"`
	CountResponses *CountResponses `json:"countResponses,omitempty"`
	// LimitName, Replaces and Shadow are for rules of a policy with a
	// domain (descriptor.go): the name the rule's limit is reported and
	// replaced by, the limit names it replaces within one call, and
	// whether it only counts what it would refuse.
	LimitName string   `json:"limitName,omitempty"`
	Replaces  []string `json:"replaces,omitempty"`
	Shadow    bool     `json:"shadow,omitempty"`
}

// Match selects requests; an empty field matches everything.
type Match struct {
	// Hosts are exact names or "*.example.com" wildcards, without port.
	Hosts []string `json:"hosts,omitempty"`
	// Methods are upper-case HTTP methods.
	Methods []string    `json:"methods,omitempty"`
	Paths   []PathMatch `json:"paths,omitempty"`
	// Descriptor is, in a policy with a domain and only there, the
	// descriptor path the rule matches, root first (descriptor.go).
	Descriptor []DescriptorEntry `json:"descriptor,omitempty"`
}

// PathMatch is exactly one of Exact, Prefix or Glob ("*" matches one path
// segment, "**" any number of segments).
type PathMatch struct {
	Exact  string `json:"exact,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Glob   string `json:"glob,omitempty"`
}

// Identity says who a request belongs to: the first source that yields a
// value names the tenant. PartitionBy adds request attributes to the tenant
// (tenant and endpoint), so each gets a budget of its own.
type Identity struct {
	Sources     []Source       `json:"sources"`
	PartitionBy []PartitionKey `json:"partitionBy,omitempty"`
}

// Source is exactly one way of naming the tenant.
type Source struct {
	// Header is the value of a request header.
	Header *HeaderSource `json:"header,omitempty"`
	// APIKey is an API key header; only its hash is ever used.
	APIKey *HeaderSource `json:"apiKey,omitempty"`
	// JWTClaim is a claim of the bearer token in a header.
	JWTClaim *JWTClaimSource `json:"jwtClaim,omitempty"`
	// ClientIP is the client address, honouring X-Forwarded-For only from
	// trusted proxies.
	ClientIP *ClientIPSource `json:"clientIP,omitempty"`
	// Shared puts every request in one bucket.
	Shared *struct{} `json:"shared,omitempty"`
	// Descriptor names the tenant (or, as a tier source, the tier) by the
	// entries of the descriptor the rule matched (descriptor.go). Policies
	// with a domain only.
	Descriptor *DescriptorSource `json:"descriptor,omitempty"`
}

// DescriptorSource reads the descriptor a rule matched: the value of its
// entry Key, or, when Key is empty, all its entries, each distinct set of
// values counting apart (envoyproxy/ratelimit's way).
type DescriptorSource struct {
	Key string `json:"key,omitempty"`
}

// HeaderSource names a request header.
type HeaderSource struct {
	Name string `json:"name"`
}

// JWTClaimSource reads Claim from a JWT carried as "Bearer <token>" in Header.
type JWTClaimSource struct {
	Claim  string `json:"claim"`
	Header string `json:"header"`
	// Verify says how the token is verified (jwt.go); nil reads the claim
	// of an unverified token, what a policy's verify: false asks for.
	Verify *JWTVerify `json:"verify,omitempty"`
}

// ClientIPSource is the client address; TrustedProxies are CIDRs whose
// X-Forwarded-For is believed.
type ClientIPSource struct {
	TrustedProxies []string `json:"trustedProxies,omitempty"`
}

// Tiers says where a request's tier comes from (a header or a JWT claim) and
// which tier applies when it names none.
type Tiers struct {
	Source  Source `json:"source"`
	Default string `json:"default"`
}

// Limit is Requests per Period, or per window of Calendar (then Period is
// zero); Burst is the capacity of a token bucket or GCRA (zero means
// Requests). A Concurrency rule's limit is Concurrent requests in flight
// instead, with neither Requests nor Period.
type Limit struct {
	Requests int64    `json:"requests"`
	Period   Duration `json:"period"`
	Burst    int64    `json:"burst,omitempty"`
	// Calendar, when set, aligns the window to a calendar (calendar.go):
	// FixedWindow only.
	Calendar *Calendar `json:"calendar,omitempty"`
	// Concurrent is the requests a tenant may have in flight at once
	// (Concurrency rules only).
	Concurrent int64 `json:"concurrent,omitempty"`
}

// Override replaces a rule's limits for one tenant.
type Override struct {
	Tenant string  `json:"tenant"`
	Limits []Limit `json:"limits"`
}

// Duration is a time.Duration written as a Go duration string ("1m0s", "50ms").
type Duration struct{ time.Duration }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string such as "1m" or "50ms".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"1m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// Selects reports whether the policy applies to a pod with these labels.
func (p *Policy) Selects(podLabels map[string]string) bool {
	return p.Selector.Matches(podLabels) // none if invalid: Validate refuses such a policy before it is used
}

// Entry is the entry of the policy object with this name and UID, if c
// has one: a policy deleted and created again under its name is another
// object. A nil c, or an empty uid, has none.
func (c *Config) Entry(name, uid string) (*Policy, bool) {
	if c == nil || uid == "" {
		return nil, false
	}
	for i := range c.Policies {
		if p := &c.Policies[i]; p.Name == name && p.UID == uid {
			return p, true
		}
	}
	return nil, false
}

// ForPod is c reduced to the policies that select a pod with these labels.
func (c *Config) ForPod(podLabels map[string]string) *Config {
	out := &Config{Schema: c.Schema, Namespace: c.Namespace, Revision: c.Revision}
	for _, p := range c.Policies {
		if p.Selects(podLabels) {
			out.Policies = append(out.Policies, p)
		}
	}
	return out
}

// Newer reports whether c is to replace in, the configuration in service:
// when either has no revision they are unordered and c replaces it, as a
// file written by hand always has.
func (c *Config) Newer(in *Config) bool {
	if in == nil || c.Revision == 0 || in.Revision == 0 {
		return true
	}
	return c.Revision > in.Revision
}
