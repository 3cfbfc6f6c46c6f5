// Package identity finds who a request belongs to (its tenant) and its tier,
// as a compiled config.Identity and config.Tiers say.
//
// Sources are tried in order and the first that yields a value names the
// tenant:
//
//   - header: the header's value, trimmed.
//   - apiKey: the header's value, hashed at once: the tenant is
//     "sha256:<lowercase hex SHA-256 of the key>", which is also how
//     overrides name it. The raw key is never kept, so it cannot reach a
//     log line, an error, a metric or a Redis key.
//   - jwtClaim: a claim of the JSON Web Token in the header ("Bearer
//     <token>", or the bare token in a header other than Authorization).
//     The token is verified first (verify.go): its signature against the
//     policy's key set, exp and nbf, iss and aud when set. A token that does
//     not verify yields no value, so the next source decides: a forged
//     token is never a tenant of its own. Only under the policy's
//     verify: false is the claim read unverified.
//   - clientIP: the peer address of the connection; X-Forwarded-For only
//     when the peer is a trusted proxy (see ClientAddr).
//   - shared: one tenant for every request.
//
// A request for which no source yields a value is not let through
// unlimited: it belongs to the anonymous tenant, one bucket per rule shared
// by every such request.
//
// PartitionBy appends the request's method, path and/or host to the tenant,
// so that each tenant gets a budget per endpoint.
package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/request"
)

const (
	// Anonymous is the tenant of requests for which no source yields a
	// value. It starts with a NUL byte, which no header value can hold, so
	// a client calling itself "anonymous" does not share its bucket.
	Anonymous = "\x00anonymous"
	// Shared is the tenant of every request under a shared source.
	Shared = "\x00shared"
)

// Identity is who a request belongs to under one rule.
type Identity struct {
	// Tenant is the value that named the tenant: a header or claim value,
	// a client IP address, "sha256:<hex>" for an API key, or Anonymous or
	// Shared. It is client input: hash it, never log it.
	Tenant string
	// Key is Tenant followed by the partition values (method, path, host),
	// each after a NUL byte: what the rule's bucket is named after, once
	// hashed with the policy's salt. It equals Tenant without partitionBy.
	Key string
}

// Name is the tenant as overrides name it: Tenant, or "anonymous" and
// "shared" for the tenants no request value named.
func (id Identity) Name() string {
	switch id.Tenant {
	case Anonymous:
		return "anonymous"
	case Shared:
		return "shared"
	}
	return id.Tenant
}

// source yields a tenant or tier value from a request, or "" for none.
type source interface {
	value(r *request.Request) string
	// header is the canonical name of the header the source reads, "" for
	// none.
	header() string
}

type partition uint8

const (
	byMethod partition = iota
	byPath
	byHost
)

// Resolver resolves the identity of requests under one config.Identity. It
// is immutable and safe for concurrent use.
type Resolver struct {
	sources   []source
	partition []partition
}

// New compiles cfg once, so that resolving a request parses no
// configuration.
func New(cfg config.Identity) (*Resolver, error) {
	if len(cfg.Sources) == 0 {
		return nil, errors.New("identity needs at least one source")
	}
	r := &Resolver{}
	for i, s := range cfg.Sources {
		src, err := compileSource(s)
		if err != nil {
			return nil, fmt.Errorf("identity source %d: %w", i, err)
		}
		r.sources = append(r.sources, src)
	}
	for _, name := range cfg.PartitionBy {
		var p partition
		switch name {
		case config.PartitionByMethod:
			p = byMethod
		case config.PartitionByPath:
			p = byPath
		case config.PartitionByHost:
			p = byHost
		default: // config.Parse refuses it
			return nil, fmt.Errorf("partitionBy %q is not one of Method, Path, Host", name)
		}
		if slices.Contains(r.partition, p) {
			return nil, fmt.Errorf("partitionBy names %s twice", name)
		}
		r.partition = append(r.partition, p)
	}
	return r, nil
}

func compileSource(s config.Source) (source, error) {
	switch {
	case s.Header != nil && s.Header.Name != "":
		return headerSource(http.CanonicalHeaderKey(s.Header.Name)), nil
	case s.APIKey != nil && s.APIKey.Name != "":
		return apiKeySource(http.CanonicalHeaderKey(s.APIKey.Name)), nil
	case s.JWTClaim != nil && s.JWTClaim.Claim != "" && s.JWTClaim.Header != "":
		return newJWTClaimSource(s.JWTClaim)
	case s.ClientIP != nil:
		trusted, err := ParseTrustedProxies(s.ClientIP.TrustedProxies)
		if err != nil {
			return nil, err
		}
		return clientIPSource{trusted: trusted}, nil
	case s.Shared != nil:
		return sharedSource{}, nil
	}
	return nil, errors.New("must be exactly one of header, apiKey, jwtClaim (with claim and header), clientIP or shared")
}

// Headers are the canonical names of the headers the resolver reads (the
// request package makes sure each has one value).
func (res *Resolver) Headers() []string {
	var out []string
	for _, s := range res.sources {
		if h := s.header(); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// TrustedProxies are the proxies the resolver's clientIP sources trust.
func (res *Resolver) TrustedProxies() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range res.sources {
		if c, ok := s.(clientIPSource); ok {
			out = append(out, c.trusted...)
		}
	}
	return out
}

// Resolve returns the identity of r: the first source's value, or
// Anonymous, followed by the partition values.
func (res *Resolver) Resolve(r *request.Request) Identity {
	tenant := Anonymous
	for _, s := range res.sources {
		if v := s.value(r); v != "" {
			tenant = v
			break
		}
	}
	if len(res.partition) == 0 {
		return Identity{Tenant: tenant, Key: tenant}
	}
	var parts [3]string // one per partition kind, each at most once
	for i, p := range res.partition {
		switch p {
		case byMethod:
			parts[i] = r.Method
		case byPath:
			parts[i] = r.PartitionPath()
		case byHost:
			parts[i] = r.Host
		}
	}
	return res.identity(tenant, parts[:len(res.partition)])
}

// Identify is the identity Resolve gives a request whose first source to
// yield a value yields tenant ("" when none does), with method, path and
// host as a request.Request holds them (PartitionPath for path): what
// /debug/tenant looks up.
func (res *Resolver) Identify(tenant, method, path, host string) Identity {
	if tenant == "" {
		tenant = Anonymous
		for _, s := range res.sources {
			if _, shared := s.(sharedSource); shared {
				tenant = Shared
				break
			}
		}
	}
	var parts [3]string
	for i, p := range res.partition {
		parts[i] = [...]string{byMethod: method, byPath: path, byHost: host}[p]
	}
	return res.identity(tenant, parts[:len(res.partition)])
}

// identity names tenant's bucket: its key is tenant, then each partition
// value after a NUL byte.
func (res *Resolver) identity(tenant string, parts []string) Identity {
	if len(parts) == 0 {
		return Identity{Tenant: tenant, Key: tenant}
	}
	n := len(tenant)
	for _, p := range parts {
		n += 1 + len(p)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(tenant)
	for _, p := range parts {
		b.WriteByte(0)
		b.WriteString(p)
	}
	return Identity{Tenant: tenant, Key: b.String()}
}

type headerSource string

func (h headerSource) value(r *request.Request) string { return r.HeaderValue(string(h)) }
func (h headerSource) header() string                  { return string(h) }

type apiKeySource string

// value hashes the key at once, so that it is never kept.
func (h apiKeySource) header() string { return string(h) }

func (h apiKeySource) value(r *request.Request) string {
	key := r.HeaderValue(string(h))
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	var buf [len("sha256:") + 2*sha256.Size]byte
	n := copy(buf[:], "sha256:")
	hex.Encode(buf[n:], sum[:])
	return string(buf[:])
}

type clientIPSource struct {
	trusted []netip.Prefix
}

func (c clientIPSource) header() string { return "" }

func (c clientIPSource) value(r *request.Request) string {
	addr, ok := ClientAddr(r, c.trusted)
	if !ok {
		return ""
	}
	return addr.String()
}

type sharedSource struct{}

func (sharedSource) value(*request.Request) string { return Shared }
func (sharedSource) header() string                { return "" }
