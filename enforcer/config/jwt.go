package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/MicahParks/jwkset"
)

// JWTLeeway is how far a token's exp and nbf may be off the enforcer's
// clock: clocks of an issuer and of a node drift apart by seconds.
const JWTLeeway = 30 * time.Second

// JWTAlgorithms are the signature algorithms a verified token may use: the
// public-key ones only. An HMAC token (HS256...) is refused whatever the
// key set, so a public key can never serve as an HMAC secret, and so is an
// unsigned one (alg none).
var JWTAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// JWTVerify says how a jwtClaim source verifies its token: the signature
// against one of the keys of JWKSURL or JWKS (exactly one is set), exp and
// nbf within JWTLeeway, and iss and aud when Issuer and Audiences are set.
type JWTVerify struct {
	// JWKSURL is where the JSON Web Key Set is fetched (http or https).
	JWKSURL string `json:"jwksURL,omitempty"`
	// JWKS is the JSON Web Key Set itself, compiled in from the Secret or
	// ConfigMap the policy names: public keys only.
	JWKS json.RawMessage `json:"jwks,omitempty"`
	// Issuer, when set, must equal the token's iss.
	Issuer string `json:"issuer,omitempty"`
	// Audiences, when set, must hold one of the token's aud.
	Audiences []string `json:"audiences,omitempty"`
}

func (v *JWTVerify) validate(path string, add addFunc) {
	switch {
	case (v.JWKSURL == "") == (len(v.JWKS) == 0):
		add(path, "must set exactly one of jwksURL or jwks")
	case v.JWKSURL != "":
		if u, err := url.Parse(v.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			add(path+".jwksURL", "%q is not an http or https URL", v.JWKSURL)
		}
	default:
		if err := CheckKeySet(v.JWKS); err != nil {
			add(path+".jwks", "%v", err)
		}
	}
	if slices.Contains(v.Audiences, "") {
		add(path+".audiences", "must not hold an empty audience")
	}
}

// CheckKeySet says whether raw is a JSON Web Key Set a token can be
// verified with: at least one key, each an RSA, EC or OKP public key.
// Symmetric (oct) keys and private key material are refused: the set is
// copied into a ConfigMap, which is no place for a secret, and a symmetric
// key would let whoever holds it mint tokens.
func CheckKeySet(raw []byte) error {
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(raw, &set); err != nil {
		return fmt.Errorf("is not a JSON Web Key Set: %w", err)
	}
	if len(set.Keys) == 0 {
		return fmt.Errorf(`is a JSON Web Key Set without keys: it needs {"keys": [...]} with the issuer's public keys`)
	}
	for i, k := range set.Keys {
		if k.KTY != jwkset.KtyRSA && k.KTY != jwkset.KtyEC && k.KTY != jwkset.KtyOKP {
			return fmt.Errorf("key %d (kid %q) is of type %q: only RSA, EC and OKP public keys verify tokens", i, k.KID, k.KTY)
		}
		if k.D != "" || k.P != "" || k.Q != "" || k.DP != "" || k.DQ != "" || k.QI != "" || k.K != "" {
			return fmt.Errorf("key %d (kid %q) holds private key material: publish the public key only", i, k.KID)
		}
		if a := k.ALG.String(); a != "" && !slices.Contains(JWTAlgorithms, a) {
			return fmt.Errorf("key %d (kid %q) has alg %q: only %v verify tokens", i, k.KID, a, JWTAlgorithms)
		}
		if _, err := jwkset.NewJWKFromMarshal(k, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{}); err != nil {
			return fmt.Errorf("key %d (kid %q) is not a usable public key: %w", i, k.KID, err)
		}
	}
	return nil
}
