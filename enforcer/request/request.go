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
	"slices"
	"strings"
)

// Request is the canonical request: what rules match, identities resolve
// and the application receives.
type Request struct {
	// Method is the method as sent; it is a standard method in upper case or
	// an extension method.
	Method string
	// MethodOverrides are the methods a POST asks frameworks to route it
	// as, upper case: every value of X-HTTP-Method-Override, X-HTTP-Method
	// and X-Method-Override, and of a _method field of the query or of a
	// URL-encoded body read before deciding. Frameworks differ in which
	// one wins, so a rule of any of them applies. Nil without any.
	MethodOverrides []string
	// AnyMethod is set for a POST whose body is a form the enforcer could
	// not read before deciding (multipart, or URL-encoded of unknown or
	// large size): its _method could name any method, so rules of every
	// method apply.
	AnyMethod bool
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
	ReasonHeader        = "header"
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
	if ct := r.Header["Content-Type"]; len(ct) > 1 && slices.ContainsFunc(ct[1:], func(v string) bool { return v != ct[0] }) {
		return Request{}, refuse(ReasonHeader, "the request has several Content-Type headers with different values: send one")
	}
	if cookies := r.Header["Cookie"]; r.ProtoMajor >= 2 && len(cookies) > 1 {
		// HTTP/2 may split cookies over several fields; HTTP/1.1 allows
		// one Cookie header, their values joined (RFC 9113, 8.2.3).
		r.Header["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	ip, trusted := c.peer(r.RemoteAddr)
	if err := c.canonicalHeaders(r.Header, trusted); err != nil {
		return Request{}, err
	}
	// Request trailers are not forwarded: a server that merges them into
	// the header would read fields the limiter never saw.
	r.Trailer = nil
	setForwarded(r, ip)
	overrides, anyMethod := methodOverrides(r)
	return Request{
		Method:          r.Method,
		MethodOverrides: overrides,
		AnyMethod:       anyMethod,
		Host:            host,
		Path:            path,
		FoldedPath:      Fold(path),
		Header:          r.Header,
		RemoteAddr:      r.RemoteAddr,
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

// overrideHeaders are the headers by which frameworks let a POST be routed
// as another method.
var overrideHeaders = [...]string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// methodOverrides are the methods a POST asks to be routed as, and whether
// its body may ask for any (see Request.MethodOverrides, AnyMethod).
func methodOverrides(r *http.Request) (methods []string, anyMethod bool) {
	if r.Method != http.MethodPost {
		return nil, false
	}
	for _, k := range overrideHeaders {
		for _, v := range r.Header[k] {
			methods = append(methods, strings.ToUpper(strings.TrimSpace(v)))
		}
	}
	methods = formMethods(methods, r.URL.RawQuery)
	switch mediaType(r.Header["Content-Type"]) {
	case "application/x-www-form-urlencoded":
		// A form body the proxy read before deciding.
		if b, ok := r.Body.(interface{ Bytes() []byte }); ok {
			methods = formMethods(methods, string(b.Bytes()))
		} else if r.ContentLength != 0 {
			anyMethod = true
		}
	case "multipart/form-data":
		anyMethod = true
	}
	return methods, anyMethod
}

// formMethods appends the _method fields of a URL-encoded form to methods,
// with field names as PHP reads them: "." and " " (and "[" when
// unmatched) are "_", so ".method" and "%5Fmethod" are _method too.
func formMethods(methods []string, form string) []string {
	if !strings.Contains(form, "method") {
		return methods
	}
	for form != "" {
		var field string
		field, form, _ = strings.Cut(form, "&")
		name, value, _ := strings.Cut(field, "=")
		if !strings.Contains(name, "method") {
			continue
		}
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if phpFieldName(name) != "_method" {
			continue
		}
		if v, err := url.QueryUnescape(value); err == nil {
			value = v
		}
		methods = append(methods, strings.ToUpper(strings.TrimSpace(value)))
	}
	return methods
}

// phpFieldName is a form field name as PHP registers it: leading spaces
// dropped, then " ", "." and an unmatched "[" made "_".
func phpFieldName(name string) string {
	name = strings.TrimLeft(name, " ")
	if i := strings.IndexByte(name, '['); i >= 0 && strings.IndexByte(name[i:], ']') < 0 {
		name = name[:i] + "_" + name[i+1:]
	}
	return strings.NewReplacer(" ", "_", ".", "_").Replace(name)
}

// mediaType is the lower-case media type of a Content-Type; Canonicalize
// has refused requests with differing ones.
func mediaType(ct []string) string {
	if len(ct) == 0 {
		return ""
	}
	t, _, _ := strings.Cut(ct[0], ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// quote is s in double quotes, shortened for an error message.
func quote(s string) string {
	const most = 64
	if len(s) > most {
		s = s[:most] + "..."
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
