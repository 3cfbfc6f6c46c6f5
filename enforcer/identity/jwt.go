package identity

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/request"
)

// maxTokenLen bounds the work a client can make the enforcer do per
// request: a longer token yields no value.
const maxTokenLen = 32 << 10

type jwtClaimSource struct {
	name string // of the header, canonical
	// bare is set when the header may carry the token without "Bearer ".
	bare  bool
	claim string
	// path is claim split at dots, for nested claims such as org.id; nil
	// when the claim has no dot.
	path []string
	// verifier checks the token before its claim is read; nil under the
	// policy's verify: false.
	verifier *verifier
}

func newJWTClaimSource(c *config.JWTClaimSource) (jwtClaimSource, error) {
	s := jwtClaimSource{name: http.CanonicalHeaderKey(c.Header), claim: c.Claim}
	s.bare = s.name != "Authorization"
	if strings.Contains(c.Claim, ".") {
		s.path = strings.Split(c.Claim, ".")
	}
	if c.Verify != nil {
		v, err := sharedVerifier(c.Verify)
		if err != nil {
			return jwtClaimSource{}, err
		}
		s.verifier = v
	}
	return s, nil
}

func (s jwtClaimSource) header() string { return s.name }

func (s jwtClaimSource) value(r *request.Request) string {
	token, ok := bearerToken(r.HeaderValue(s.name), s.bare)
	if !ok || len(token) > maxTokenLen {
		return ""
	}
	// A token that does not verify names no one: the next source decides.
	if s.verifier != nil && !s.verifier.verify(token) {
		return ""
	}
	return claim(token, s.claim, s.path)
}

// bearerToken takes the token out of "Bearer <token>" (the scheme in any
// case), or takes the whole value when bare tokens are allowed.
func bearerToken(v string, bare bool) (string, bool) {
	// The scheme and the token may be parted by any blanks, as JWT
	// libraries accept: "Bearer<TAB>token" must not be an anonymous request.
	const scheme = "Bearer"
	if len(v) > len(scheme)+1 && strings.EqualFold(v[:len(scheme)], scheme) && (v[len(scheme)] == ' ' || v[len(scheme)] == '\t') {
		return strings.TrimSpace(v[len(scheme):]), true
	}
	if bare && v != "" && !strings.ContainsAny(v, " \t") {
		return v, true
	}
	return "", false
}

// claim reads a claim from a JWS compact token (header.payload.signature),
// verified by the caller or not at all: a string claim as is, a number in plain decimal
// notation (1e3 is "1000"), anything else as no value. name is looked up
// as a top-level claim first (claim names such as
// "https://example.com/tenant" hold dots); when absent and path is set,
// as the nested claim path[0].path[1]... Malformed tokens yield "".
func claim(token, name string, path []string) string {
	if len(token) > maxTokenLen {
		return ""
	}
	header, rest, ok := strings.Cut(token, ".")
	if !ok || header == "" {
		return ""
	}
	payload, signature, ok := strings.Cut(rest, ".")
	if !ok || strings.IndexByte(signature, '.') >= 0 {
		return "" // not three segments: an encrypted token (JWE) or garbage
	}
	data, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(payload, "="))
	if err != nil {
		return ""
	}
	var claims map[string]json.RawMessage
	if json.Unmarshal(data, &claims) != nil {
		return ""
	}
	if v, ok := claims[name]; ok || path == nil {
		return scalar(v)
	}
	for i, step := range path {
		v, ok := claims[step]
		if !ok {
			return ""
		}
		if i == len(path)-1 {
			return scalar(v)
		}
		claims = nil
		if json.Unmarshal(v, &claims) != nil {
			return ""
		}
	}
	return ""
}

// scalar formats a JSON string or number claim; other values are "".
func scalar(v json.RawMessage) string {
	if len(v) == 0 {
		return ""
	}
	switch c := v[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return ""
		}
		return s
	case c == '-' || ('0' <= c && c <= '9'):
		if !bytes.ContainsAny(v, ".eE") {
			return string(v) // an integer, kept digit for digit however long
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return ""
		}
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return ""
}
