package compile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

// KeySetRef names a key of a Secret or ConfigMap of the policy's
// namespace that holds a JSON Web Key Set.
type KeySetRef struct {
	// Kind is "Secret" or "ConfigMap".
	Kind string
	Name string
	Key  string
}

// String names the reference as messages do: Secret issuer (key jwks.json).
func (r KeySetRef) String() string { return fmt.Sprintf("%s %s (key %s)", r.Kind, r.Name, r.Key) }

// KeySetRefs lists the Secret and ConfigMap keys the jwtClaim sources of
// p name, defaults applied, each once.
func KeySetRefs(p *v1alpha1.RateLimitPolicy) []KeySetRef {
	spec := p.Spec.DeepCopy()
	spec.ApplyDefaults()
	var out []KeySetRef
	for _, c := range spec.JWTClaims() {
		if ref, ok := keySetRef(c.Source); ok && !slices.Contains(out, ref) {
			out = append(out, ref)
		}
	}
	return out
}

func keySetRef(c *v1alpha1.JWTClaimSource) (KeySetRef, bool) {
	switch {
	case !c.Verifies() || c.Keys == nil:
		return KeySetRef{}, false
	case c.Keys.SecretRef != nil:
		return KeySetRef{Kind: "Secret", Name: c.Keys.SecretRef.Name, Key: c.Keys.SecretRef.Key}, true
	case c.Keys.ConfigMapRef != nil:
		return KeySetRef{Kind: "ConfigMap", Name: c.Keys.ConfigMapRef.Name, Key: c.Keys.ConfigMapRef.Key}, true
	}
	return KeySetRef{}, false
}

// verifications is how each jwtClaim source of a spec verifies its token;
// a source absent from it (verify: false) reads tokens unverified.
type verifications map[*v1alpha1.JWTClaimSource]*config.JWTVerify

// jwtVerifications compiles the verification of every jwtClaim source of
// spec, with the key sets held in Secrets and ConfigMaps copied in.
func jwtVerifications(p *v1alpha1.RateLimitPolicy, spec *v1alpha1.RateLimitPolicySpec, keySets map[KeySetRef][]byte) (verifications, error) {
	out := verifications{}
	for _, c := range spec.JWTClaims() {
		src := c.Source
		if !src.Verifies() {
			continue
		}
		if src.Keys == nil {
			return nil, &PolicyError{Policy: p.Name, Reason: v1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf(
				"%s verifies tokens but names no keys: set keys to the issuer's JSON Web Key Set (jwksURL, secretRef or configMapRef), "+
					"or verify: false to read claims of unverified tokens, only behind a gateway that verifies them", c.Path)}
		}
		v := &config.JWTVerify{JWKSURL: src.Keys.JWKSURL, Issuer: src.Issuer, Audiences: slices.Clone(src.Audiences)}
		if ref, ok := keySetRef(src); ok {
			data, exists := keySets[ref]
			if !exists {
				return nil, &PolicyError{Policy: p.Name, Reason: v1alpha1.ReasonKeySetMissing, Message: fmt.Sprintf(
					"%s.keys names %s, which does not exist: create it in namespace %s holding the issuer's JSON Web Key Set", c.Path, ref, p.Namespace)}
			}
			if err := config.CheckKeySet(data); err != nil {
				return nil, &PolicyError{Policy: p.Name, Reason: v1alpha1.ReasonKeySetMissing, Message: fmt.Sprintf(
					"%s.keys names %s, whose key set %v", c.Path, ref, err)}
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, data); err != nil {
				return nil, &PolicyError{Policy: p.Name, Reason: v1alpha1.ReasonKeySetMissing, Message: fmt.Sprintf(
					"%s.keys names %s, which is not JSON: %v", c.Path, ref, err)}
			}
			v.JWKS = compact.Bytes()
		}
		out[src] = v
	}
	return out, nil
}
