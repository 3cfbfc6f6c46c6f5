package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// TokenSource gives the bearer token that /status requires.
type TokenSource interface {
	Token() (string, error)
}

// tokenFileTTL is how long a read of the token file is reused: the kubelet
// replaces a Secret volume's files when the Secret changes, so a rotated
// token is in force within a second, without a read per request.
const tokenFileTTL = time.Second

// TokenFile reads the token from a file (a Secret volume), again when the
// last read is older than a second. Surrounding white space is not part of
// the token.
type TokenFile struct {
	Path string
	// Now is the clock of the cache; nil means time.Now.
	Now func() time.Time

	mu     sync.Mutex
	readAt time.Time
	token  string
	err    error
}

// Token is the file's token; an error when the file cannot be read or is
// empty (the Secret is not there yet).
func (f *TokenFile) Token() (string, error) {
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := now(); f.readAt.IsZero() || t.Sub(f.readAt) >= tokenFileTTL || t.Before(f.readAt) {
		f.readAt = t
		f.token, f.err = readToken(f.Path)
	}
	return f.token, f.err
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read status token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("status token file %s is empty", path)
	}
	return token, nil
}

// authorizeStatus decides who may read /status. With a token source, every
// caller, loopback included, presents "Authorization: Bearer <token>";
// without one, only loopback peers (the pod itself) are served.
func (s *Server) authorizeStatus(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.StatusToken == nil {
		if isLoopbackPeer(r) {
			return true
		}
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "/status is served to loopback peers only: this enforcer has no --status-token-file"})
		return false
	}
	want, err := s.opts.StatusToken.Token()
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no status credential loaded yet: " + err.Error()})
		return false
	}
	got, ok := bearerToken(r)
	if !ok || !tokensEqual(got, want) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice-enforcer"`)
		msg := "wrong bearer token"
		if !ok {
			msg = "missing Authorization: Bearer <token>"
		}
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": msg})
		return false
	}
	return true
}

func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// tokensEqual compares in constant time, lengths included: both sides are
// hashed to the same size first.
func tokensEqual(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// isLoopbackPeer says whether the request came over a loopback address:
// from inside the pod, or through kubectl port-forward.
func isLoopbackPeer(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackOnly refuses requests from peers other than loopback ones: the
// debug listener is bound to loopback, and this holds even if it is not.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isLoopbackPeer(r) {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "/debug is served to loopback peers only: use kubectl port-forward"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Authorized serves next to the callers /status serves: with a token
// source, those presenting the token; without one, loopback peers.
func (s *Server) Authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.authorizeStatus(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}
