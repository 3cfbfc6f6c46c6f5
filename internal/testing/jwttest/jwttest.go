// Package jwttest is a token issuer for tests: key pairs, tokens signed
// with them, forged and confused tokens, and a JSON Web Key Set server on
// 127.0.0.1 whose keys can be rotated and which can be stopped.
package jwttest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// T is what the helpers need of a test: testing.TB and Ginkgo's GinkgoT()
// both are one.
type T interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// Key is a signing key pair with its kid.
type Key struct {
	KID     string
	private crypto.Signer
	method  jwt.SigningMethod
}

// NewRSA makes a 2048-bit RSA key signing RS256.
func NewRSA(t T, kid string) *Key {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{KID: kid, private: k, method: jwt.SigningMethodRS256}
}

// NewEC makes a P-256 key signing ES256.
func NewEC(t T, kid string) *Key {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{KID: kid, private: k, method: jwt.SigningMethodES256}
}

// Sign is a token of claims signed by k, its header naming k's kid.
func (k *Key) Sign(t T, claims map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(k.method, jwt.MapClaims(claims))
	tok.Header["kid"] = k.KID
	s, err := tok.SignedString(k.private)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// HMACConfused is a token of claims signed with HS256, using as the HMAC
// secret k's public key as PEM, the bytes an algorithm-confusion attack
// feeds a verifier that takes the token's alg on trust.
func (k *Key) HMACConfused(t T, claims map[string]any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.private.Public())
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(claims))
	tok.Header["kid"] = k.KID
	s, err := tok.SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Unsigned is a token of claims with alg none and an empty signature.
func Unsigned(claims map[string]any) string {
	enc := base64.RawURLEncoding
	payload, _ := json.Marshal(claims)
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc.EncodeToString(payload) + "."
}

// Claims are sub, tenant_id and plan, valid from a minute ago for an hour,
// with extra claims added or replaced.
func Claims(tenant string, extra map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{"sub": tenant, "tenant_id": tenant, "iat": now.Unix(),
		"nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// JWKS is the JSON Web Key Set of the public halves of keys.
func JWKS(t T, keys ...*Key) []byte {
	t.Helper()
	set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{}}
	for _, k := range keys {
		j, err := jwkset.NewJWKFromKey(k.private.Public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{KID: k.KID, ALG: jwkset.ALG(k.method.Alg()), USE: jwkset.UseSig}})
		if err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	data, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Server serves a JSON Web Key Set on 127.0.0.1 and counts its fetches.
type Server struct {
	URL     string
	srv     *httptest.Server
	mu      sync.Mutex
	body    []byte
	fetches atomic.Int64
}

// Serve starts a Server with keys, stopped at the end of the test.
func Serve(t T, keys ...*Key) *Server {
	t.Helper()
	s := &Server{body: JWKS(t, keys...)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		body := s.body
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	s.URL = s.srv.URL + "/.well-known/jwks.json"
	t.Cleanup(s.srv.Close)
	return s
}

// Rotate makes the server serve keys instead.
func (s *Server) Rotate(t T, keys ...*Key) {
	body := JWKS(t, keys...)
	s.mu.Lock()
	s.body = body
	s.mu.Unlock()
}

// Stop closes the server: its port refuses connections from now on.
func (s *Server) Stop() { s.srv.Close() }

// Fetches is how many times the key set was fetched.
func (s *Server) Fetches() int64 { return s.fetches.Load() }
