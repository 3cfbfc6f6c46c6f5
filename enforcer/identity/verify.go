package identity

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	"github.com/sluice-dev/sluice/enforcer/config"
)

const (
	// JWKSFetchTimeout bounds one fetch of a key set, and how long a request
	// bearing an unknown kid waits for the key set to be fetched again.
	JWKSFetchTimeout = 2 * time.Second
	// JWKSRefreshInterval is how often a fetched key set is fetched again.
	JWKSRefreshInterval = 5 * time.Minute
	// JWKSUnknownKIDInterval is the least time between two fetches caused
	// by tokens naming a kid the key set lacks: clients sending made-up
	// kids cannot make the enforcer hammer the issuer.
	JWKSUnknownKIDInterval = 10 * time.Second
	// maxJWKSBytes bounds a fetched key set.
	maxJWKSBytes = 1 << 20

	// VerifiedTokens is how many verified tokens a source remembers, so
	// that a client's next request with the same token checks no signature.
	VerifiedTokens = 10000
	// VerifiedTokenAge is the longest a token is taken as verified without
	// checking its signature again (less when it expires sooner): a key
	// removed from the key set stops its tokens within that time.
	VerifiedTokenAge = time.Minute
)

// verifier checks a token's signature against a key set, its exp and nbf
// within config.JWTLeeway, and its iss and aud when the policy sets them.
type verifier struct {
	keys   jwt.Keyfunc
	parser *jwt.Parser
	// verified maps the SHA-256 of a verified token to when it stops being
	// taken as verified. Only tokens that verified are kept: a forged one
	// costs a signature check each time, and never a place here.
	verified *lru.Cache[[sha256.Size]byte, time.Time]
	now      func() time.Time
}

func newVerifier(v *config.JWTVerify, now func() time.Time) (*verifier, error) {
	var keys keyfunc.Keyfunc
	var err error
	if v.JWKSURL != "" {
		keys, err = remoteKeySet(v.JWKSURL)
	} else if err = config.CheckKeySet(v.JWKS); err == nil {
		keys, err = keyfunc.NewJWKSetJSON(v.JWKS)
	}
	if err != nil {
		return nil, fmt.Errorf("jwtClaim key set: %w", err)
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(config.JWTAlgorithms),
		jwt.WithLeeway(config.JWTLeeway),
		jwt.WithTimeFunc(now),
	}
	if v.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.Issuer))
	}
	if len(v.Audiences) > 0 {
		opts = append(opts, jwt.WithAudience(v.Audiences...))
	}
	cache, err := lru.New[[sha256.Size]byte, time.Time](VerifiedTokens)
	if err != nil {
		return nil, err
	}
	return &verifier{keys: keys.Keyfunc, parser: jwt.NewParser(opts...), verified: cache, now: now}, nil
}

// verify reports whether token is signed by a key of the set and valid now.
func (v *verifier) verify(token string) bool {
	sum := sha256.Sum256([]byte(token))
	now := v.now()
	if until, ok := v.verified.Get(sum); ok {
		if now.Before(until) {
			return true
		}
		v.verified.Remove(sum)
	}
	var claims jwt.RegisteredClaims
	if _, err := v.parser.ParseWithClaims(token, &claims, v.keys); err != nil {
		return false
	}
	until := now.Add(VerifiedTokenAge)
	if claims.ExpiresAt != nil {
		if exp := claims.ExpiresAt.Add(config.JWTLeeway); exp.Before(until) {
			until = exp
		}
	}
	v.verified.Add(sum, until)
	return true
}

// verifiers holds one verifier per verification a configuration asks for,
// shared by every rule and tier source that asks the same and kept across
// reloads: a token is checked once per request, whatever the number of
// rules reading it, and a reload forgets no verified token.
var verifiers = struct {
	sync.Mutex
	byConfig map[string]*verifier
}{byConfig: map[string]*verifier{}}

// maxVerifiers bounds verifiers: past it, the verifiers of older
// configurations are let go (the resolvers using them keep theirs).
const maxVerifiers = 64

func sharedVerifier(v *config.JWTVerify) (*verifier, error) {
	key, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	verifiers.Lock()
	defer verifiers.Unlock()
	if shared, ok := verifiers.byConfig[string(key)]; ok {
		return shared, nil
	}
	shared, err := newVerifier(v, time.Now)
	if err != nil {
		return nil, err
	}
	if len(verifiers.byConfig) >= maxVerifiers {
		clear(verifiers.byConfig)
	}
	verifiers.byConfig[string(key)] = shared
	return shared, nil
}

// remoteKeySets holds one fetched key set per URL for the whole process:
// a configuration reload keeps the keys it has and fetches nothing again.
var remoteKeySets = struct {
	sync.Mutex
	byURL map[string]keyfunc.Keyfunc
}{byURL: map[string]keyfunc.Keyfunc{}}

// remoteKeySet is the key set at url, fetched now (for at most
// JWKSFetchTimeout) and then every JWKSRefreshInterval, and again when a
// token names a kid it lacks (at most once per JWKSUnknownKIDInterval). A
// failed fetch keeps the keys fetched before; before any fetch succeeds,
// no token verifies.
func remoteKeySet(url string) (keyfunc.Keyfunc, error) {
	remoteKeySets.Lock()
	defer remoteKeySets.Unlock()
	if k, ok := remoteKeySets.byURL[url]; ok {
		return k, nil
	}
	k, err := keyfunc.NewDefaultOverrideCtx(context.Background(), []string{url}, keyfunc.Override{
		Client:            &http.Client{Timeout: JWKSFetchTimeout, Transport: limitedTransport{http.DefaultTransport}},
		HTTPTimeout:       JWKSFetchTimeout,
		RefreshInterval:   JWKSRefreshInterval,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(JWKSUnknownKIDInterval), 1),
		// A request waits no longer than a fetch takes: when the limiter
		// would make it wait longer, the kid is unknown at once.
		RateLimitWaitMax: JWKSFetchTimeout,
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(ctx context.Context, err error) {
				slog.WarnContext(ctx, "fetching the JSON Web Key Set failed: tokens verify with the keys fetched before, if any", "url", u, "error", err)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	remoteKeySets.byURL[url] = k
	return k, nil
}

// limitedTransport cuts a key set's body at maxJWKSBytes, so that a
// misbehaving server cannot make the enforcer read without end.
type limitedTransport struct{ next http.RoundTripper }

func (t limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, maxJWKSBytes), resp.Body}
	return resp, nil
}
