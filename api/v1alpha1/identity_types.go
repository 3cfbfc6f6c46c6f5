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

// Identity says how a request's tenant is found: each tenant has its own
// budget under every limit.
// +kubebuilder:validation:XValidation:rule="!self.sources.exists(s, has(s.clientIP) || has(s.shared)) || (self.sources.filter(s, has(s.clientIP) || has(s.shared)).size() == 1 && (has(self.sources[size(self.sources) - 1].clientIP) || has(self.sources[size(self.sources) - 1].shared)))",message="clientIP and shared always find a tenant, so sources after them are never used: put one of them last, and only one"
type Identity struct {
	// Sources are tried in order; the first that finds a value in the request
	// names the tenant. A request for which none finds a value is limited as
	// the tenant "anonymous". End the list with clientIP or shared to
	// choose a fallback. In a rateLimitService policy the sources are
	// descriptor and shared; without identity, each distinct descriptor
	// (its entries' values) is a tenant, as envoyproxy/ratelimit counts.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Sources []IdentitySource `json:"sources"`

	// PartitionBy gives each tenant a separate budget per method, path and/or
	// host of the request, so that a tenant is limited per endpoint. Path is
	// the cleaned URL path without query string: on rules whose paths hold
	// IDs, every ID gets its own budget.
	// +listType=set
	// +kubebuilder:validation:MaxItems=3
	// +optional
	PartitionBy []PartitionKey `json:"partitionBy,omitempty"`
}

// PartitionKey is a part of the request that splits a tenant's budget.
// +kubebuilder:validation:Enum=Method;Path;Host
type PartitionKey string

const (
	// PartitionByMethod splits budgets by HTTP method.
	PartitionByMethod PartitionKey = "Method"
	// PartitionByPath splits budgets by URL path.
	PartitionByPath PartitionKey = "Path"
	// PartitionByHost splits budgets by Host header.
	PartitionByHost PartitionKey = "Host"
)

// IdentitySource is one way to find the tenant of a request. Set exactly one
// member.
// +kubebuilder:validation:XValidation:rule="(has(self.header) ? 1 : 0) + (has(self.apiKey) ? 1 : 0) + (has(self.jwtClaim) ? 1 : 0) + (has(self.clientIP) ? 1 : 0) + (has(self.shared) ? 1 : 0) + (has(self.descriptor) ? 1 : 0) == 1",message="an identity source sets exactly one of header, apiKey, jwtClaim, clientIP, shared or descriptor; use one list item per source"
type IdentitySource struct {
	// Header takes the tenant from a request header, such as X-Tenant-ID set
	// by an authenticating gateway.
	// +optional
	Header *HeaderSource `json:"header,omitempty"`

	// APIKey takes the tenant from an API key header. The key is hashed
	// (SHA-256) as soon as it is read and never stored, logged or reported.
	// +optional
	APIKey *APIKeySource `json:"apiKey,omitempty"`

	// JWTClaim takes the tenant from a claim of a JSON Web Token, once the
	// token is verified against the issuer's keys. A token that does not
	// verify names no tenant: the next source decides.
	// +optional
	JWTClaim *JWTClaimSource `json:"jwtClaim,omitempty"`

	// ClientIP takes the client's IP address as the tenant.
	// +optional
	ClientIP *ClientIPSource `json:"clientIP,omitempty"`

	// Shared puts every request in one tenant: the limits are for all clients
	// together.
	// +optional
	Shared *SharedSource `json:"shared,omitempty"`
	// Descriptor takes the tenant from the descriptor a rule of a
	// rateLimitService policy matched: the value of its entry key, such as
	// user_id, which overrides name; or, without key, all its entries, each
	// distinct set of values counting apart (the default of these
	// policies). rateLimitService policies only.
	// +optional
	Descriptor *DescriptorSource `json:"descriptor,omitempty"`
}

// DescriptorSource reads the descriptor Envoy sent.
type DescriptorSource struct {
	// Key of the entry to read, such as user_id. Omitted, all the entries
	// are read.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Key string `json:"key,omitempty"`
}

// HeaderSource reads a request header.
type HeaderSource struct {
	// Name of the header, such as X-Tenant-ID (case-insensitive).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Name string `json:"name"`
}

// APIKeySource reads an API key from a request header.
type APIKeySource struct {
	// Header that carries the key; its whole value is the key.
	// +kubebuilder:default=X-API-Key
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	// +optional
	Header string `json:"header,omitempty"`
}

// JWTClaimSource reads a claim of a JSON Web Token, verified first.
// +kubebuilder:validation:XValidation:rule="(has(self.verify) && !self.verify) || has(self.keys)",message="jwtClaim verifies tokens: set keys to the issuer's public keys (keys.jwksURL, or keys.secretRef or keys.configMapRef naming a JSON Web Key Set), or set verify: false to read claims of unverified tokens, which any client can write, only behind a gateway that verifies them"
// +kubebuilder:validation:XValidation:rule="!has(self.verify) || self.verify || (!has(self.keys) && !has(self.issuer) && !has(self.audiences))",message="verify: false checks no keys, issuer or audiences: remove them, or remove verify: false"
type JWTClaimSource struct {
	// Claim is the name of a top-level claim of the token's payload, such as
	// sub or tenant_id. Its value must be a string or a number.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Claim string `json:"claim"`

	// Header that carries the token. In Authorization the value is
	// "Bearer <token>"; any other header carries the bare token.
	// +kubebuilder:default=Authorization
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	// +optional
	Header string `json:"header,omitempty"`

	// Verify, true unless set, checks the token before its claim is read:
	// its signature against keys (RSA, EC or Ed25519; HMAC and unsigned
	// tokens are refused), exp and nbf with 30 seconds of leeway, and iss
	// and aud when issuer and audiences are set. false reads the claim of
	// any token unverified: every client can then name its own tenant or
	// tier, so use it only behind a gateway that verifies tokens. The
	// policy's Accepted condition warns of it.
	// +optional
	Verify *bool `json:"verify,omitempty"`

	// Keys are the issuer's public keys, as a JSON Web Key Set.
	// +optional
	Keys *JWTKeys `json:"keys,omitempty"`

	// Issuer, when set, must equal the token's iss claim.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Issuer string `json:"issuer,omitempty"`

	// Audiences, when set, must include one of the token's aud claim.
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +optional
	Audiences []string `json:"audiences,omitempty"`
}

// JWTKeys says where the JSON Web Key Set that verifies tokens is. Set
// exactly one member.
// +kubebuilder:validation:XValidation:rule="(has(self.jwksURL) ? 1 : 0) + (has(self.secretRef) ? 1 : 0) + (has(self.configMapRef) ? 1 : 0) == 1",message="keys sets exactly one of jwksURL, secretRef or configMapRef"
type JWTKeys struct {
	// JWKSURL is where each enforcer fetches the key set, such as
	// https://issuer.example/.well-known/jwks.json: at start, every 5
	// minutes, and when a token names a kid the set lacks (at most once
	// per 10 seconds), each fetch within 2 seconds. When a fetch fails the
	// keys fetched before keep verifying; before any fetch succeeds no
	// token verifies.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['https', 'http'] && url(self).getHost() != ''",message="jwksURL must be an https (or http) URL, such as https://issuer.example/.well-known/jwks.json"
	// +optional
	JWKSURL string `json:"jwksURL,omitempty"`

	// SecretRef names a Secret of the policy's namespace holding the key
	// set. The manager compiles it into the enforcers' configuration, which
	// is a ConfigMap: it must hold public keys only.
	// +optional
	SecretRef *KeySetReference `json:"secretRef,omitempty"`

	// ConfigMapRef names a ConfigMap of the policy's namespace holding the
	// key set, compiled in as secretRef is.
	// +optional
	ConfigMapRef *KeySetReference `json:"configMapRef,omitempty"`
}

// KeySetReference names the key of a Secret or ConfigMap holding a JSON
// Web Key Set.
type KeySetReference struct {
	// Name of the Secret or ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key of its data that holds the key set.
	// +kubebuilder:default=jwks.json
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	Key string `json:"key,omitempty"`
}

// Verifies says whether tokens are verified: verify is not false.
func (c *JWTClaimSource) Verifies() bool { return c.Verify == nil || *c.Verify }

// ClientIPSource uses the client's IP address.
type ClientIPSource struct {
	// TrustedProxies are the CIDRs of the proxies and load balancers in front
	// of the pods. When the connection comes from one of them, the client is
	// the rightmost address of X-Forwarded-For that is not a trusted proxy.
	// Empty, the connection's peer address is the client and
	// X-Forwarded-For is ignored, since clients can forge it.
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="self.all(c, isCIDR(c))",messageExpression="'trustedProxies must be CIDRs such as 10.0.0.0/8 or fd00::/8 (use /32 or /128 for one address), not ' + self.filter(c, !isCIDR(c))[0]"
	// +optional
	TrustedProxies []string `json:"trustedProxies,omitempty"`
}

// SharedSource puts every request in one tenant.
type SharedSource struct{}

// Tiers give each request a tier, such as the plan of its tenant.
type Tiers struct {
	// Source is where the tier is read, such as a header X-Plan set by an
	// authenticating gateway. A value that no limit of the policy names, or
	// no value, means the default tier.
	Source TierSource `json:"source"`

	// Default is the tier of requests whose source has no known tier.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])?$`
	Default string `json:"default"`
}

// TierSource is where a request's tier is read. Set exactly one member.
// +kubebuilder:validation:XValidation:rule="(has(self.header) ? 1 : 0) + (has(self.jwtClaim) ? 1 : 0) + (has(self.descriptor) ? 1 : 0) == 1",message="a tier source sets exactly one of header, jwtClaim or descriptor"
// +kubebuilder:validation:XValidation:rule="!has(self.descriptor) || has(self.descriptor.key)",message="a tier is the value of one descriptor entry: set descriptor.key to the key of the entry that holds the tier, such as plan"
type TierSource struct {
	// Header takes the tier from a request header.
	// +optional
	Header *HeaderSource `json:"header,omitempty"`

	// JWTClaim takes the tier from a claim of a JSON Web Token, once the
	// token is verified; a token that does not verify has the default tier.
	// +optional
	JWTClaim *JWTClaimSource `json:"jwtClaim,omitempty"`
	// Descriptor takes the tier from the entry key of the descriptor a rule
	// of a rateLimitService policy matched. rateLimitService policies only,
	// and their only tier source.
	// +optional
	Descriptor *DescriptorSource `json:"descriptor,omitempty"`
}
