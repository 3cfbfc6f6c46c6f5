package rules

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/request"
)

// matcher is a compiled config.Match; an empty list matches everything.
type matcher struct {
	hosts   []hostPattern
	methods []string
	paths   []pathPattern
	// suffixes lets exact and prefix paths match with a format suffix
	// ("/v1/exports.json" for "/v1/exports"), which Rails and older Spring
	// route to the same handler, and exact paths with or without a trailing
	// slash ("/login/" for "/login"), which Laravel, Express and Rails route
	// to the same handler: limited rules only.
	suffixes bool
}

// hostPattern is a lower-case host name, or for "*.example.com" the suffix
// ".example.com".
type hostPattern struct {
	name     string
	wildcard bool
}

type pathKind uint8

const (
	exactPath pathKind = iota
	prefixPath
	globPath
)

type pathPattern struct {
	kind pathKind
	// value is the cleaned exact path, or the cleaned prefix without its
	// trailing slash ("" for "/").
	value string
	glob  glob
}

// compileMatch compiles m; fold compiles the paths in lower case, to be
// matched against request.Request.FoldedPath.
func compileMatch(m config.Match, fold bool) (matcher, error) {
	c := matcher{suffixes: fold}
	for _, h := range m.Hosts {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		if rest, ok := strings.CutPrefix(h, "*"); ok {
			if !strings.HasPrefix(rest, ".") || len(rest) < 2 {
				return matcher{}, fmt.Errorf("host %q is not a name or a *.domain wildcard", h)
			}
			c.hosts = append(c.hosts, hostPattern{name: rest, wildcard: true})
			continue
		}
		c.hosts = append(c.hosts, hostPattern{name: h})
	}
	c.methods = slices.Clone(m.Methods)
	// Every common framework serves HEAD with the GET handler (as
	// http.ServeMux does), so a limit on GET holds for HEAD too.
	if slices.Contains(c.methods, http.MethodGet) && !slices.Contains(c.methods, http.MethodHead) {
		c.methods = append(c.methods, http.MethodHead)
	}
	for _, p := range m.Paths {
		if fold {
			p.Exact, p.Prefix, p.Glob = request.Fold(p.Exact), request.Fold(p.Prefix), request.Fold(p.Glob)
		}
		switch {
		case p.Exact != "" && p.Prefix == "" && p.Glob == "":
			c.paths = append(c.paths, pathPattern{kind: exactPath, value: request.CleanPath(p.Exact)})
		case p.Prefix != "" && p.Exact == "" && p.Glob == "":
			c.paths = append(c.paths, pathPattern{kind: prefixPath, value: strings.TrimRight(request.CleanPath(p.Prefix), "/")})
		case p.Glob != "" && p.Exact == "" && p.Prefix == "":
			c.paths = append(c.paths, pathPattern{kind: globPath, glob: compileGlob(request.CleanPath(p.Glob))})
		default:
			return matcher{}, errors.New("a path match is exactly one of exact, prefix or glob")
		}
	}
	return c, nil
}

// matches reports whether a request matches: its host, its method or the
// method it asks to be routed as, and path (r.Path, or r.FoldedPath for a
// matcher compiled with fold).
func (m *matcher) matches(r *request.Request, path string) bool {
	return m.matchesHost(r.Host) && m.matchesMethod(r) && m.matchesPath(path)
}

func (m *matcher) matchesMethod(r *request.Request) bool {
	if len(m.methods) == 0 || r.AnyMethod || slices.Contains(m.methods, r.Method) {
		return true
	}
	for _, o := range r.MethodOverrides {
		if slices.Contains(m.methods, o) {
			return true
		}
	}
	return false
}

func (m *matcher) matchesHost(host string) bool {
	if len(m.hosts) == 0 {
		return true
	}
	for _, h := range m.hosts {
		if h.wildcard {
			if len(host) > len(h.name) && strings.HasSuffix(host, h.name) {
				return true
			}
		} else if host == h.name {
			return true
		}
	}
	return false
}

func (m *matcher) matchesPath(path string) bool {
	if len(m.paths) == 0 {
		return true
	}
	for i := range m.paths {
		if m.paths[i].matches(path, m.suffixes) {
			return true
		}
	}
	return false
}

func (p *pathPattern) matches(path string, suffixes bool) bool {
	switch p.kind {
	case exactPath:
		return path == p.value || (suffixes && (trimSlash(path) == trimSlash(p.value) || hasFormatSuffix(path, p.value)))
	case prefixPath:
		// Whole segments only: /v1 is a prefix of /v1 and /v1/x, not /v10.
		if !strings.HasPrefix(path, p.value) {
			return false
		}
		if len(path) == len(p.value) {
			return true
		}
		next := path[len(p.value)]
		return next == '/' || (suffixes && next == '.' && p.value != "")
	case globPath:
		return p.glob.match(path)
	}
	return false
}

// trimSlash is path without its trailing slash; "/" stays itself.
func trimSlash(path string) string {
	if len(path) > 1 {
		return strings.TrimSuffix(path, "/")
	}
	return path
}

// hasFormatSuffix reports whether path is exact followed by a format
// suffix in its last segment: "/v1/exports.json" for "/v1/exports".
func hasFormatSuffix(path, exact string) bool {
	return len(path) > len(exact)+1 && path[len(exact)] == '.' && strings.HasPrefix(path, exact) &&
		!strings.HasSuffix(exact, "/") && strings.IndexByte(path[len(exact):], '/') < 0
}
