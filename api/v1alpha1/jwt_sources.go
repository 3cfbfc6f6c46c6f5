package v1alpha1

import "fmt"

// JWTClaimAt is a jwtClaim source of a spec and its field path.
type JWTClaimAt struct {
	Path   string
	Source *JWTClaimSource
}

// JWTClaims lists the spec's jwtClaim sources, identity and tier, with
// their field paths under "spec".
func (s *RateLimitPolicySpec) JWTClaims() []JWTClaimAt {
	var out []JWTClaimAt
	add := func(path string, id *Identity) {
		if id == nil {
			return
		}
		for i := range id.Sources {
			if c := id.Sources[i].JWTClaim; c != nil {
				out = append(out, JWTClaimAt{Path: fmt.Sprintf("%s.sources[%d].jwtClaim", path, i), Source: c})
			}
		}
	}
	add("spec.identity", s.Identity)
	if s.Tiers != nil && s.Tiers.Source.JWTClaim != nil {
		out = append(out, JWTClaimAt{Path: "spec.tiers.source.jwtClaim", Source: s.Tiers.Source.JWTClaim})
	}
	for i := range s.Rules {
		add(fmt.Sprintf("spec.rules[%d].identity", i), s.Rules[i].Identity)
	}
	return out
}

// UnverifiedJWTClaims are the field paths of the spec's jwtClaim sources
// that read tokens unverified (verify: false).
func (s *RateLimitPolicySpec) UnverifiedJWTClaims() []string {
	var out []string
	for _, c := range s.JWTClaims() {
		if !c.Source.Verifies() {
			out = append(out, c.Path)
		}
	}
	return out
}
