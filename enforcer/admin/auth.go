package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/enforcer/debugapi"
)

// TokenSource gives a bearer token the admin listener requires.
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
		return "", fmt.Errorf("read token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return token, nil
}

// defaultReadPeers are the peers served reads when no token grants them
// and the operator names no peer: a process of the pod itself or kubectl
// port-forward. Not the whole of 127.0.0.0/8: a mesh sidecar (Istio)
// forwards remote callers from 127.0.0.6.
var defaultReadPeers = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}

// tokensFor are the token sources that grant access: the write token
// grants reads too, the status token reads only.
func (s *Server) tokensFor(access debugapi.Access) []TokenSource {
	var out []TokenSource
	if s.opts.WriteToken != nil {
		out = append(out, s.opts.WriteToken)
	}
	if access == debugapi.Read && s.opts.StatusToken != nil {
		out = append(out, s.opts.StatusToken)
	}
	return out
}

// authorize decides whether r may have access. Where a token grants it,
// every caller, loopback included, presents "Authorization: Bearer
// <token>". Where none does, the peers the operator trusts by address are
// served (TrustedPeers); without them, reads go to 127.0.0.1 and ::1 and
// writes to nobody.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, access debugapi.Access) bool {
	tokens := s.tokensFor(access)
	if len(tokens) == 0 {
		return s.authorizePeer(w, r, access)
	}
	got, ok := bearerToken(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice-enforcer"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing Authorization: Bearer <token>"})
		return false
	}
	var loadErr error
	loaded := 0
	for _, src := range tokens {
		want, err := src.Token()
		if err != nil {
			loadErr = err
			continue
		}
		loaded++
		if tokensEqual(got, want) {
			return true
		}
	}
	if access == debugapi.Write && s.opts.StatusToken != nil {
		if want, err := s.opts.StatusToken.Token(); err == nil && tokensEqual(got, want) {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": r.Method + " " + r.URL.Path +
				" changes state: the read token (--status-token-file) does not allow it; present the write token (--write-token-file)"})
			return false
		}
	}
	if loaded == 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no admin credential loaded yet: " + loadErr.Error()})
		return false
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="sluice-enforcer"`)
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "wrong bearer token"})
	return false
}

// authorizePeer serves access by the peer's address alone, for an
// enforcer with no token that grants it.
func (s *Server) authorizePeer(w http.ResponseWriter, r *http.Request, access debugapi.Access) bool {
	peers := s.opts.TrustedPeers
	if len(peers) == 0 && access == debugapi.Read {
		peers = defaultReadPeers
	}
	if peer, ok := peerAddr(r); ok && slices.Contains(peers, peer) {
		return true
	}
	switch {
	case access == debugapi.Write && len(s.opts.TrustedPeers) == 0:
		writeJSON(w, http.StatusForbidden, map[string]string{"error": r.Method + " " + r.URL.Path +
			" changes state and this enforcer has no --write-token-file: give it one (callers then present the token), or name the one address trusted to call it with --admin-trusted-peer (e.g. 127.0.0.1)"})
	case access == debugapi.Write:
		writeJSON(w, http.StatusForbidden, map[string]string{"error": r.Method + " " + r.URL.Path +
			" is served to the --admin-trusted-peer addresses only: this enforcer has no --write-token-file"})
	case len(s.opts.TrustedPeers) == 0:
		writeJSON(w, http.StatusForbidden, map[string]string{"error": r.URL.Path +
			" is served to 127.0.0.1 and ::1 only: this enforcer has no --status-token-file (or name the trusted address with --admin-trusted-peer)"})
	default:
		writeJSON(w, http.StatusForbidden, map[string]string{"error": r.URL.Path +
			" is served to the --admin-trusted-peer addresses only: this enforcer has no --status-token-file"})
	}
	return false
}

// peerAddr is the request's peer address, IPv4 in IPv6 unmapped.
func peerAddr(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap().WithZone(""), true
}

// ParsePeers reads the --admin-trusted-peer values: exact addresses, not
// ranges, so that naming 127.0.0.1 leaves out a mesh's 127.0.0.6.
func ParsePeers(values []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, v := range values {
		a, err := netip.ParseAddr(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("trusted peer %q: an IP address, without a port or a prefix length: %w", v, err)
		}
		out = append(out, a.Unmap().WithZone(""))
	}
	return out, nil
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

// Authorized serves next to the callers /status serves (read access).
func (s *Server) Authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.authorize(w, r, debugapi.Read) {
			next.ServeHTTP(w, r)
		}
	})
}
