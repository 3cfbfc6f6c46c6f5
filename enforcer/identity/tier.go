package identity

import (
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"

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
		src, err := newJWTClaimSource(s.JWTClaim)
		if err != nil {
			return nil, err
		}
		t.source = src
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

// TierChoice is how a request's tier was found, as /debug/tenant explains
// it.
type TierChoice struct {
	// Tier is what Tier returns for the request.
	Tier string
	// Source names where the tier is read: "header X-Plan", or "claim
	// plan of the Authorization token"; "" for a tier named directly.
	Source string
	// Named is what the request names there, "" for nothing. It is client
	// input: never a metrics label, a log field or a key.
	Named string
	// Known reports whether Named is a tier of the policy; otherwise the
	// default tier, Default, applies.
	Known   bool
	Default string
	// Like is a tier of the policy that an unknown Named equals but for
	// case: tiers are compared exactly.
	Like string
}

// Choose is Tier for r, with how it was found; the zero TierChoice
// without tiers.
func (t *TierResolver) Choose(r *request.Request) TierChoice {
	if t == nil {
		return TierChoice{}
	}
	c := t.ChooseNamed(t.source.value(r))
	switch s := t.source.(type) {
	case headerSource:
		c.Source = "header " + string(s)
	case jwtClaimSource:
		c.Source = "claim " + s.claim + " of the " + s.name + " token"
	}
	return c
}

// ChooseNamed is Named(name), with how it was found.
func (t *TierResolver) ChooseNamed(name string) TierChoice {
	if t == nil {
		return TierChoice{}
	}
	_, known := t.known[name]
	c := TierChoice{Tier: t.Named(name), Named: name, Known: known && name != "", Default: t.def}
	if !c.Known && name != "" {
		for _, k := range slices.Sorted(maps.Keys(t.known)) {
			if strings.EqualFold(k, name) {
				c.Like = k
				break
			}
		}
	}
	return c
}
