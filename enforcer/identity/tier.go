package identity

import (
	"errors"
	"net/http"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/request"
)

// TierResolver finds the tier of requests under one config.Tiers. It is
// immutable and safe for concurrent use.
type TierResolver struct {
	source source
	def    string
	// known maps each tier the policy names to itself, so Tier returns a
	// string of the configuration, never one of the request.
	known map[string]string
}

// NewTiers compiles cfg. known are the tiers the policy's limits name: a
// request naming another tier, or none, is of the default tier, which keeps
// tiers (a metrics label) a bounded set whatever clients send. A nil cfg
// yields a nil resolver, whose Tier is "".
func NewTiers(cfg *config.Tiers, known []string) (*TierResolver, error) {
	if cfg == nil {
		return nil, nil
	}
	if cfg.Default == "" {
		return nil, errors.New("tiers need a default tier")
	}
	t := &TierResolver{def: cfg.Default, known: map[string]string{cfg.Default: cfg.Default}}
	switch s := cfg.Source; {
	case s.Header != nil && s.Header.Name != "" && s.JWTClaim == nil:
		t.source = headerSource(http.CanonicalHeaderKey(s.Header.Name))
	case s.JWTClaim != nil && s.JWTClaim.Claim != "" && s.JWTClaim.Header != "" && s.Header == nil:
		t.source = newJWTClaimSource(s.JWTClaim)
	default:
		return nil, errors.New("the tier source must be exactly one of header or jwtClaim (with claim and header)")
	}
	for _, k := range known {
		t.known[k] = k
	}
	return t, nil
}

// Tier is the tier r names, if the policy knows it, else the default tier.
func (t *TierResolver) Tier(r *request.Request) string {
	if t == nil {
		return ""
	}
	return t.Named(t.source.value(r))
}

// Header is the canonical name of the header the tier is read from; ""
// without tiers.
func (t *TierResolver) Header() string {
	if t == nil {
		return ""
	}
	return t.source.header()
}

// Named is the tier of a request naming name: name if the policy knows
// it, else the default tier; "" without tiers.
func (t *TierResolver) Named(name string) string {
	if t == nil {
		return ""
	}
	if tier, ok := t.known[name]; ok {
		return tier
	}
	return t.def
}
