package identity

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
)

func TestJWTClaim(t *testing.T) {
	b64 := base64.RawURLEncoding.EncodeToString
	cases := map[string]struct {
		claim, header, value string
		want                 string
	}{
		"string claim":                 {"tenant_id", "Authorization", "Bearer " + token(`{"tenant_id":"acme","sub":"u1"}`), "acme"},
		"scheme in any case":           {"tenant_id", "Authorization", "bearer  " + token(`{"tenant_id":"acme"}`), "acme"},
		"integer":                      {"org", "Authorization", "Bearer " + token(`{"org":42}`), "42"},
		"integer beyond int64":         {"org", "Authorization", "Bearer " + token(`{"org":123456789012345678901234567890}`), "123456789012345678901234567890"},
		"negative integer":             {"org", "Authorization", "Bearer " + token(`{"org":-7}`), "-7"},
		"exponent":                     {"org", "Authorization", "Bearer " + token(`{"org":1.5e3}`), "1500"},
		"fraction":                     {"org", "Authorization", "Bearer " + token(`{"org":0.25}`), "0.25"},
		"large exponent":               {"org", "Authorization", "Bearer " + token(`{"org":1e21}`), "1000000000000000000000"},
		"escaped string":               {"t", "Authorization", "Bearer " + token(`{"t":"a\u00e9\"b"}`), `aé"b`},
		"nested claim":                 {"org.id", "Authorization", "Bearer " + token(`{"org":{"id":"acme","name":"Acme"}}`), "acme"},
		"deeply nested number":         {"a.b.c", "Authorization", "Bearer " + token(`{"a":{"b":{"c":7}}}`), "7"},
		"dotted top-level name":        {"https://example.com/tenant", "Authorization", "Bearer " + token(`{"https://example.com/tenant":"acme"}`), "acme"},
		"padded payload":               {"sub", "Authorization", "Bearer " + b64([]byte("{}")) + "." + base64.URLEncoding.EncodeToString([]byte(`{"sub":"padded1"}`)) + ".", "padded1"},
		"empty signature (alg none)":   {"sub", "Authorization", "Bearer " + b64([]byte(`{"alg":"none"}`)) + "." + b64([]byte(`{"sub":"u"}`)) + ".", "u"},
		"bare token in its own header": {"sub", "X-Id-Token", token(`{"sub":"u2"}`), "u2"},
		"Bearer in its own header":     {"sub", "X-Id-Token", "Bearer " + token(`{"sub":"u3"}`), "u3"},

		"missing claim":               {"tenant_id", "Authorization", "Bearer " + token(`{"sub":"u1"}`), ""},
		"missing nested claim":        {"org.id", "Authorization", "Bearer " + token(`{"org":{"name":"Acme"}}`), ""},
		"nested through a string":     {"org.id", "Authorization", "Bearer " + token(`{"org":"acme"}`), ""},
		"empty string claim":          {"sub", "Authorization", "Bearer " + token(`{"sub":""}`), ""},
		"boolean claim":               {"admin", "Authorization", "Bearer " + token(`{"admin":true}`), ""},
		"null claim":                  {"sub", "Authorization", "Bearer " + token(`{"sub":null}`), ""},
		"object claim":                {"org", "Authorization", "Bearer " + token(`{"org":{"id":1}}`), ""},
		"array claim":                 {"aud", "Authorization", "Bearer " + token(`{"aud":["a","b"]}`), ""},
		"not Bearer":                  {"sub", "Authorization", "Basic dXNlcjpwYXNz", ""},
		"bare token in Authorization": {"sub", "Authorization", token(`{"sub":"u"}`), ""},
		"Bearer alone":                {"sub", "Authorization", "Bearer ", ""},
		"no header":                   {"sub", "Authorization", "", ""},
		"two segments":                {"sub", "Authorization", "Bearer " + b64([]byte("{}")) + "." + b64([]byte(`{"sub":"u"}`)), ""},
		"five segments (JWE)":         {"sub", "Authorization", "Bearer a.b.c.d.e", ""},
		"payload not base64":          {"sub", "Authorization", "Bearer e30.%%%.sig", ""},
		"payload not JSON":            {"sub", "Authorization", "Bearer e30." + b64([]byte("sub=u")) + ".sig", ""},
		"payload an array":            {"sub", "Authorization", "Bearer e30." + b64([]byte(`["sub"]`)) + ".sig", ""},
		"payload truncated JSON":      {"sub", "Authorization", "Bearer e30." + b64([]byte(`{"sub":"u"`)) + ".sig", ""},
		"token too long":              {"sub", "Authorization", "Bearer " + token(`{"sub":"u","pad":"`+strings.Repeat("x", maxTokenLen)+`"}`), ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			res, err := New(config.Identity{Sources: []config.Source{jwtClaim(c.claim, c.header)}})
			g.Expect(err).NotTo(HaveOccurred())
			var headers []string
			if c.value != "" {
				headers = append(headers, c.header+": "+c.value)
			}
			id := res.Resolve(newRequest("GET", "/", "192.0.2.7:1", headers...))
			want := c.want
			if want == "" {
				want = Anonymous
			}
			g.Expect(id.Tenant).To(Equal(want))
		})
	}
}

// FuzzJWTClaim checks that no header value or claim name panics, and that
// a string claim put in a token is the value read back.
func FuzzJWTClaim(f *testing.F) {
	b64 := base64.RawURLEncoding.EncodeToString
	for _, seed := range []struct{ value, claim string }{
		{"Bearer " + token(`{"tenant_id":"acme"}`), "tenant_id"},
		{"Bearer " + token(`{"org":{"id":42}}`), "org.id"},
		{"Bearer " + token(`{"org":1e400}`), "org"},
		{"Bearer " + token(`{"a":{"b":[1,2]}}`), "a.b.c"},
		{"Bearer " + token(`{"":""}`), "."},
		{"Bearer " + token(`{"n":-0.0e-0}`), "n"},
		{"Bearer " + token(`null`), "sub"},
		{"bearer e30." + b64([]byte(`{"sub":"\ud800"}`)) + ".", "sub"},
		{"Bearer e30.e30=.", "sub"},
		{"Bearer ...", ".."},
		{"Bearer a.b.c.d.e", "sub"},
		{"Basic dXNlcjpwYXNz", "sub"},
		{"Bearer", ""},
	} {
		f.Add(seed.value, seed.claim)
	}
	f.Fuzz(func(t *testing.T, value, name string) {
		var path []string
		if strings.Contains(name, ".") {
			path = strings.Split(name, ".")
		}
		if tok, ok := bearerToken(value, true); ok {
			claim(tok, name, path)
		}
		// Also straight from the payload, so the fuzzer reaches the JSON
		// decoding without having to find base64 first.
		claim("e30."+base64.RawURLEncoding.EncodeToString([]byte(value))+".", name, path)

		if name == "" || path != nil || value == "" || !utf8.ValidString(value) || !utf8.ValidString(name) {
			return
		}
		payload, err := json.Marshal(map[string]string{name: value})
		if err != nil {
			t.Fatal(err)
		}
		tok := "e30." + base64.RawURLEncoding.EncodeToString(payload) + ".c2ln"
		if len(tok) <= maxTokenLen {
			if got := claim(tok, name, nil); got != value {
				t.Fatalf("claim %q = %q in the token, read back as %q", name, value, got)
			}
		}
	})
}
