package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// MaxWindows bounds the limits of one rule (and of each tier and override);
// the API allows 8.
const MaxWindows = 8

// Load reads and validates the compiled configuration at path, or, when
// there is no such file, at path+CompressedSuffix (ReadDocument).
func Load(path string) (*Config, error) {
	data, err := ReadDocument(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and validates a compiled configuration. Unknown fields are
// errors: a typo must not silently drop a limit.
func Parse(data []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	// Only white space may follow the document (dec.More is false before a
	// stray '}' or ']', so it cannot tell).
	if rest := bytes.TrimSpace(data[dec.InputOffset():]); len(rest) > 0 {
		return nil, fmt.Errorf("decode: trailing data after the configuration at offset %d", dec.InputOffset())
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Hash is a content hash of the configuration, reported on /status so the
// operator can tell which enforcers run the current one.
func (c *Config) Hash() string {
	b, _ := json.Marshal(c) // plain structs and maps: cannot fail
	return HashJSON(b)
}

// HashJSON is Hash of a configuration already encoded with json.Marshal.
func HashJSON(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// Validate reports every problem of c, each prefixed with where it is.
func (c *Config) Validate() error {
	var errs []error
	add := func(path string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if c.Schema != Schema {
		return fmt.Errorf("schema %q is not supported: this enforcer reads %q", c.Schema, Schema)
	}
	if c.Namespace == "" {
		add("namespace", "must not be empty")
	}
	seen := map[string]bool{}
	for i := range c.Policies {
		p := &c.Policies[i]
		path := fmt.Sprintf("policies[%d]", i)
		if p.Name != "" {
			path = fmt.Sprintf("policies[%d](%s)", i, p.Name)
		}
		if p.Name == "" {
			add(path+".name", "must not be empty")
		} else if seen[p.Name] {
			add(path+".name", "duplicate policy %q", p.Name)
		}
		seen[p.Name] = true
		p.validate(path, add)
	}
	c.validateDomains(add)
	return errors.Join(errs...)
}

type addFunc func(path string, format string, args ...any)

// Problems reports every problem of p on its own, each prefixed with its
// path under at: the compiler passes "spec", so that messages name the
// fields as the user wrote them (spec.rules[1](api).limits[0].period).
func (p *Policy) Problems(at string) []error {
	var errs []error
	p.validate(at, func(path string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	})
	return errs
}

func (p *Policy) validate(path string, add addFunc) {
	for _, problem := range p.Selector.Problems() {
		add(path+".selector", "%s", problem)
	}
	oneOf(add, path+".mode", p.Mode, Modes)
	oneOf(add, path+".failureMode", p.FailureMode, FailureModes)
	if p.Consistency != "" {
		oneOf(add, path+".consistency", p.Consistency, Consistencies)
	}
	oneOf(add, path+".responseHeaders", p.ResponseHeaders, ResponseHeaderSets)
	if p.Timeout.Duration < time.Millisecond || p.Timeout.Duration > time.Second {
		add(path+".timeout", "must be between 1ms and 1s, got %s", p.Timeout.Duration)
	}
	if p.Replicas < 0 {
		add(path+".replicas", "must not be negative, got %d", p.Replicas)
	}
	if p.UpstreamPort < 0 || p.UpstreamPort > 65535 {
		add(path+".upstreamPort", "must be a port number, got %d", p.UpstreamPort)
	}
	if p.UpstreamProtocol != "" {
		oneOf(add, path+".upstreamProtocol", p.UpstreamProtocol, UpstreamProtocols)
	}
	for i, cidr := range p.TrustedProxies {
		if _, err := netip.ParsePrefix(cidr); err != nil {
			add(fmt.Sprintf("%s.trustedProxies[%d]", path, i), "%q is not a CIDR: %v", cidr, err)
		}
	}
	if p.Tiers != nil {
		if p.Tiers.Default == "" {
			add(path+".tiers.default", "must not be empty")
		}
		if k := p.Tiers.Source.Kind(); p.Domain == "" && k != SourceHeader && k != SourceJWTClaim {
			add(path+".tiers.source", "must be exactly one of header or jwtClaim")
		}
		if j := p.Tiers.Source.JWTClaim; j != nil && j.Verify != nil {
			j.Verify.validate(path+".tiers.source.jwtClaim.verify", add)
		}
	}
	if len(p.Rules) == 0 {
		add(path+".rules", "a policy needs at least one rule")
	}
	names := map[string]bool{}
	for j := range p.Rules {
		r := &p.Rules[j]
		rpath := fmt.Sprintf("%s.rules[%d](%s)", path, j, r.Name)
		if r.Name == "" || strings.ContainsAny(r.Name, "{}/") {
			add(rpath+".name", "must be non-empty without '{', '}' or '/'")
		} else if names[r.Name] {
			add(rpath+".name", "duplicate rule %q", r.Name)
		}
		names[r.Name] = true
		r.validate(rpath, add)
	}
	p.validateDomain(path, add)
	p.validateAnswersDomain(path, add)
	p.validateConcurrency(path, add)
}

func (r *Rule) validate(path string, add addFunc) {
	r.Match.validate(path+".match", add)
	r.validateDelay(path, add)
	r.validateAnswers(path, add)
	if r.Exempt {
		if len(r.Limits) > 0 || len(r.TierLimits) > 0 || len(r.Overrides) > 0 {
			add(path, "an exempt rule has no limits or overrides")
		}
		if r.Ban != nil {
			add(path+".ban", "an exempt rule has no ban")
		}
		if r.Adaptive != nil {
			add(path+".adaptive", "an exempt rule has no limits to adapt")
		}
		return
	}
	if r.Ban != nil {
		r.Ban.validate(path+".ban", add)
	}
	r.Identity.validate(path+".identity", add)
	oneOf(add, path+".algorithm", r.Algorithm, AllAlgorithms)
	if r.Leasing != "" {
		oneOf(add, path+".leasing", r.Leasing, Leasings)
	}
	if r.Cost < 1 {
		add(path+".cost", "must be at least 1, got %d", r.Cost)
	}
	r.validateLimits(path+".limits", r.Limits, add)
	for _, tier := range slices.Sorted(maps.Keys(r.TierLimits)) {
		r.validateLimits(fmt.Sprintf("%s.tierLimits[%s]", path, tier), r.TierLimits[tier], add)
	}
	for k, o := range r.Overrides {
		if o.Tenant == "" {
			add(fmt.Sprintf("%s.overrides[%d].tenant", path, k), "must not be empty")
		}
		r.validateLimits(fmt.Sprintf("%s.overrides[%d](%s).limits", path, k, o.Tenant), o.Limits, add)
	}
	if r.Adaptive != nil {
		r.Adaptive.validate(path+".adaptive", add)
	}
}

// validateLimits checks one set of windows of r: the limiter decides any set
// that passes, so the request path does not check again.
func (r *Rule) validateLimits(path string, limits []Limit, add addFunc) {
	if r.Algorithm == Concurrency {
		r.validateConcurrent(path, limits, add)
		return
	}
	for i, l := range limits {
		if l.Concurrent != 0 {
			add(fmt.Sprintf("%s[%d].concurrent", path, i), "is for algorithm Concurrency; %s counts requests per period: remove concurrent", r.Algorithm)
		}
	}
	if len(limits) == 0 || len(limits) > MaxWindows {
		add(path, "a rule needs 1 to %d limits, got %d", MaxWindows, len(limits))
	}
	periods := make(map[time.Duration]int, len(limits))
	calendars := map[CalendarUnit]int{}
	for i, l := range limits {
		at := fmt.Sprintf("%s[%d]", path, i)
		if l.Requests < 1 {
			add(at+".requests", "must be at least 1, got %d", l.Requests)
		}
		if l.Calendar != nil {
			r.validateCalendar(at, l, calendars, i, path, add)
		} else if p := l.Period.Duration; p < time.Millisecond || p%time.Millisecond != 0 {
			add(at+".period", "must be a whole number of milliseconds, at least 1ms, got %s", p)
		} else if j, dup := periods[p]; dup {
			add(at+".period", "%s is also the period of %s[%d]: one limit per period", p, path, j)
		} else {
			periods[p] = i
		}
		if l.Burst < 0 {
			add(at+".burst", "must not be negative, got %d", l.Burst)
		}
		if c := r.Algorithm.Capacity(l); l.Requests >= 1 && r.Cost > c {
			add(at, "cost %d exceeds its capacity %d, so no request could ever pass", r.Cost, c)
		}
	}
}

func (m *Match) validate(path string, add addFunc) {
	for i, h := range m.Hosts {
		if h == "" || strings.ContainsAny(h, ":/ ") || strings.Contains(h[1:], "*") || (h[0] == '*' && !strings.HasPrefix(h, "*.")) {
			add(fmt.Sprintf("%s.hosts[%d]", path, i), "%q is not a host name or *.domain wildcard (no port)", h)
		}
	}
	for i, method := range m.Methods {
		if method == "" || method != strings.ToUpper(method) {
			add(fmt.Sprintf("%s.methods[%d]", path, i), "%q must be an upper-case HTTP method", method)
		}
	}
	for i, pm := range m.Paths {
		at := fmt.Sprintf("%s.paths[%d]", path, i)
		set := 0
		for _, v := range []string{pm.Exact, pm.Prefix, pm.Glob} {
			if v != "" {
				set++
				if !strings.HasPrefix(v, "/") {
					add(at, "%q must start with /", v)
				}
			}
		}
		if set != 1 {
			add(at, "must be exactly one of exact, prefix or glob")
		}
	}
}

func (id *Identity) validate(path string, add addFunc) {
	if len(id.Sources) == 0 {
		add(path+".sources", "needs at least one source")
	}
	for i, s := range id.Sources {
		at := fmt.Sprintf("%s.sources[%d]", path, i)
		if s.Kind() == "" {
			add(at, "must be exactly one of header, apiKey, jwtClaim, clientIP or shared (or descriptor, in a policy with a domain)")
			continue
		}
		switch {
		case s.Header != nil && s.Header.Name == "", s.APIKey != nil && s.APIKey.Name == "":
			add(at, "needs a header name")
		case s.JWTClaim != nil && (s.JWTClaim.Claim == "" || s.JWTClaim.Header == ""):
			add(at, "jwtClaim needs a claim and a header")
		case s.JWTClaim != nil && s.JWTClaim.Verify != nil:
			s.JWTClaim.Verify.validate(at+".jwtClaim.verify", add)
		case s.ClientIP != nil:
			for _, cidr := range s.ClientIP.TrustedProxies {
				if _, err := netip.ParsePrefix(cidr); err != nil {
					add(at+".clientIP.trustedProxies", "%q is not a CIDR: %v", cidr, err)
				}
			}
		}
	}
	seen := map[PartitionKey]bool{}
	for i, k := range id.PartitionBy {
		at := fmt.Sprintf("%s.partitionBy[%d]", path, i)
		oneOf(add, at, k, PartitionKeys)
		if seen[k] {
			add(at, "%s is named twice", k)
		}
		seen[k] = true
	}
}

func oneOf[T ~string](add addFunc, path string, value T, allowed []T) {
	if !slices.Contains(allowed, value) {
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i] = string(a)
		}
		add(path, "%q is not one of %s", value, strings.Join(names, ", "))
	}
}
