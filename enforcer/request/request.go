// Package request builds the one canonical request the enforcer decides on
// and forwards. Routing, identity and tiers read a Request; the forwarders
// send the *http.Request it was made from, which Canonicalize rewrote to the
// same form. Nothing the application receives can differ from what the
// limiter decided on: the request is normalised the same way for both, or
// refused.
//
// What Canonicalize does, in order:
//
//   - Method: a standard method in another case ("get", "Head") is refused;
//     frameworks route some of them as the standard method, while rules
//     compare methods exactly. CONNECT and "OPTIONS *" are refused.
//   - Target: origin-form ("/p?q"), or absolute-form ("http://h/p?q", whose
//     authority is the Host) rewritten to origin-form. Refused: a fragment
//     ("#"), control characters, a backslash, an encoded slash or backslash
//     ("%2F", "%5C"), and ";" (servlet containers cut path parameters off,
//     others do not), raw or encoded. The path is decoded and cleaned of
//     "//", "." and ".." as http.ServeMux does; when that changes it, or it
//     was percent-encoded, the cleaned path is what is forwarded, encoded
//     once, canonically. The query is forwarded as sent.
//   - Host: lower case, without a trailing dot, port kept; a Host that is
//     not a DNS name or IP literal is refused.
//   - Headers: hop-by-hop fields and those named in Connection are removed
//     (an upgrade keeps Connection: Upgrade and Upgrade; "TE: trailers" is
//     kept). Expect is removed: the enforcer answers 100-continue itself.
//   - Identity headers: a header an identity or tier source reads, present
//     more than once with different values, is refused, as is a header
//     whose name differs from one only by "_" for "-" (CGI and FastCGI map
//     both to the same HTTP_ variable).
//   - Forwarding headers: from a peer outside the trusted proxies,
//     X-Forwarded-*, X-Real-Ip and Forwarded are replaced by what the
//     enforcer saw. From a trusted proxy they are kept and the peer is
//     appended to X-Forwarded-For. X-Original-Url and X-Rewrite-Url, which
//     some frameworks route by instead of the target, are always removed,
//     as are fields spelt with "_" that CGI would take for any of these.
//   - Upgrades other than WebSocket (h2c) are not passed on: the request
//     is forwarded as a plain one. Request trailers are not forwarded.
package request

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Request is the canonical request: what rules match, identities resolve
// and the application receives.
type Request struct {
	// Method is the method as sent; it is a standard method in upper case or
	// an extension method.
	Method string
	// MethodOverride is the method an X-HTTP-Method-Override (or
	// X-HTTP-Method, X-Method-Override) header asks frameworks to route a
	// POST as, upper case; empty without one.
	MethodOverride string
	// Host is the host rules match: lower case, without port or trailing
	// dot, an IPv6 address without brackets. Empty when the request had
	// none (HTTP/1.0).
	Host string
	// Path is the decoded, cleaned path the application receives.
	Path string
	// FoldedPath is Path case-folded (Fold): what limited rules compare,
	// so that a case change does not walk around a limit of an
	// application that routes without regard to case.
	FoldedPath string
	// Header is the request's header, as forwarded (shared with the
	// *http.Request; do not modify).
	Header http.Header
	// RemoteAddr is the connection's peer, "ip:port".
	RemoteAddr string
}

// HeaderValue is the trimmed value of a header whose name is already
// canonical; Canonicalize has made sure that a header any identity source
// reads has a single value.
func (r *Request) HeaderValue(canonical string) string {
	if v := r.Header[canonical]; len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	return ""
}

// PartitionPath is the path a partitionBy Path bucket is named after:
// FoldedPath without a format suffix on its last segment, so that
// "/items/Abc.json" counts with "/items/abc", as Rails and older Spring
// route them.
func (r *Request) PartitionPath() string {
	p := r.FoldedPath
	last := strings.LastIndexByte(p, '/') + 1
	if i := strings.IndexByte(p[last:], '.'); i > 0 {
		return p[:last+i]
	}
	return p
}

// Canonicalizer makes canonical requests under one configuration. It is
// immutable and safe for concurrent use.
type Canonicalizer struct {
	identityHeaders map[string]struct{}
	trusted         []netip.Prefix
}

// NewCanonicalizer checks the headers identityHeaders names (canonical
// header names read by identity and tier sources) and passes on the
// forwarding headers of peers in trusted.
func NewCanonicalizer(identityHeaders []string, trusted []netip.Prefix) *Canonicalizer {
	c := &Canonicalizer{identityHeaders: make(map[string]struct{}, len(identityHeaders)), trusted: trusted}
	for _, h := range identityHeaders {
		c.identityHeaders[http.CanonicalHeaderKey(h)] = struct{}{}
	}
	return c
}

// Error is a request refused as ambiguous or malformed: the enforcer cannot
// be sure the application would see it as the limiter does.
type Error struct {
	// Reason is a short, fixed description, fit for a metrics label.
	Reason string
	// Detail says what was wrong, for the client.
	Detail string
}

func (e *Error) Error() string { return e.Detail }

// Reasons of an Error.
const (
	ReasonMethod        = "method"
	ReasonTarget        = "target"
	ReasonHost          = "host"
	ReasonIdentity      = "identity-header"
	ReasonForwardedHost = "forwarded-host"
)

func refuse(reason, detail string) *Error { return &Error{Reason: reason, Detail: detail} }

// Canonicalize rewrites r into the form it will be forwarded in and returns
// the Request to decide on, or an *Error for a request that must be
// refused. r.Header, r.Host, r.URL and r.RequestURI are changed in place.
func (c *Canonicalizer) Canonicalize(r *http.Request) (Request, error) {
	if err := checkMethod(r.Method); err != nil {
		return Request{}, err
	}
	path, err := canonicalTarget(r)
	if err != nil {
		return Request{}, err
	}
	host, err := canonicalHost(r)
	if err != nil {
		return Request{}, err
	}
	removeHopByHop(r.Header)
	// Request trailers are not forwarded: a server that merges them into
	// the header would read fields the limiter never saw.
	r.Trailer = nil
	if err := c.checkIdentityHeaders(r.Header); err != nil {
		return Request{}, err
	}
	c.setForwarded(r)
	return Request{
		Method:         r.Method,
		MethodOverride: methodOverride(r),
		Host:           host,
		Path:           path,
		FoldedPath:     Fold(path),
		Header:         r.Header,
		RemoteAddr:     r.RemoteAddr,
	}, nil
}

// Known makes the Request of a request already in canonical form, as the
// admin endpoint asks about one: method and host as given, path cleaned.
func Known(method, host, path string, header http.Header) Request {
	path = CleanPath(path)
	if header == nil {
		header = http.Header{}
	}
	return Request{Method: method, Host: strings.ToLower(host), Path: path, FoldedPath: Fold(path), Header: header}
}

// standardMethods are the methods of RFC 9110 and RFC 5789.
var standardMethods = [...]string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
	http.MethodConnect, http.MethodOptions, http.MethodTrace, http.MethodPatch,
}

func checkMethod(m string) error {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut, http.MethodDelete,
		http.MethodPatch, http.MethodOptions, http.MethodTrace:
		return nil
	case http.MethodConnect:
		return refuse(ReasonMethod, "CONNECT is not forwarded to the application")
	}
	for _, s := range standardMethods {
		if strings.EqualFold(m, s) {
			return refuse(ReasonMethod, "method "+quote(m)+" is "+s+" in another case: methods are case-sensitive; send "+s)
		}
	}
	return nil
}

// methodOverride is the method a POST asks frameworks to route it as: by
// header, or by a _method field of the query or of a URL-encoded form body
// the proxy has read (Symfony and Laravel read all of them; a multipart
// form's _method is not seen, see docs/enforcer.md).
func methodOverride(r *http.Request) string {
	if r.Method != http.MethodPost {
		return ""
	}
	for _, k := range [...]string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"} {
		if v := r.Header[k]; len(v) > 0 {
			return strings.ToUpper(strings.TrimSpace(v[0]))
		}
	}
	if m := formMethod(r.URL.RawQuery); m != "" {
		return m
	}
	// A form body the proxy read before deciding.
	if b, ok := r.Body.(interface{ Bytes() []byte }); ok {
		return formMethod(string(b.Bytes()))
	}
	return ""
}

// formMethod is the last _method value of a URL-encoded form, as PHP keeps
// it, in upper case.
func formMethod(form string) string {
	if !strings.Contains(form, "_method") {
		return ""
	}
	q, _ := url.ParseQuery(form) // what parses: PHP is lenient too
	if vv := q["_method"]; len(vv) > 0 {
		return strings.ToUpper(strings.TrimSpace(vv[len(vv)-1]))
	}
	return ""
}

// quote is s in double quotes, shortened for an error message.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "..."
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
