package rules

import "strings"

// glob is a compiled path glob: "*" is one path segment, "**" any number of
// segments (zero included), and a "*" inside a segment ("*.json", "v*")
// any run of characters within that segment. Matching walks the path
// without allocating, in O(len(path) × segments) at worst.
type glob []globSegment

type segmentKind uint8

const (
	exactSegment    segmentKind = iota // the segment, byte for byte
	oneSegment                         // "*": exactly one non-empty segment
	anySegments                        // "**": zero or more segments
	wildcardSegment                    // a segment with "*" inside
)

type globSegment struct {
	kind    segmentKind
	pattern string
}

// compileGlob compiles a clean, rooted glob. A trailing slash is ignored,
// as it is in the paths matched.
func compileGlob(pattern string) glob {
	pattern = strings.Trim(pattern, "/")
	if pattern == "" {
		return glob{}
	}
	var g glob
	for _, seg := range strings.Split(pattern, "/") {
		switch {
		case seg == "**":
			if len(g) > 0 && g[len(g)-1].kind == anySegments {
				continue // "**/**" is "**"
			}
			g = append(g, globSegment{kind: anySegments})
		case seg == "*":
			g = append(g, globSegment{kind: oneSegment})
		case strings.Contains(seg, "*"):
			g = append(g, globSegment{kind: wildcardSegment, pattern: seg})
		default:
			g = append(g, globSegment{kind: exactSegment, pattern: seg})
		}
	}
	return g
}

// match reports whether the rooted path p matches. Like a "*" in a shell
// pattern, a "**" remembers where it started, and on a mismatch the
// segments after it are retried one path segment further on.
func (g glob) match(p string) bool {
	p = strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/")
	end := len(p) + 1 // past the last segment
	pos := 0
	if p == "" {
		pos = end // the root has no segments
	}
	gi := 0
	star, starPos := -1, 0
	for pos < end {
		if gi < len(g) && g[gi].kind == anySegments {
			star, starPos = gi, pos
			gi++
			continue
		}
		seg, next := segmentAt(p, pos)
		if gi < len(g) && g[gi].matches(seg) {
			gi++
			pos = next
			continue
		}
		if star < 0 {
			return false
		}
		_, starPos = segmentAt(p, starPos)
		gi, pos = star+1, starPos
	}
	for gi < len(g) && g[gi].kind == anySegments {
		gi++
	}
	return gi == len(g)
}

// segmentAt is the segment of p starting at pos and where the next starts.
func segmentAt(p string, pos int) (seg string, next int) {
	if i := strings.IndexByte(p[pos:], '/'); i >= 0 {
		return p[pos : pos+i], pos + i + 1
	}
	return p[pos:], len(p) + 1
}

func (s globSegment) matches(seg string) bool {
	switch s.kind {
	case exactSegment:
		return seg == s.pattern
	case oneSegment:
		return seg != ""
	case wildcardSegment:
		return wildcardMatch(s.pattern, seg)
	}
	return false
}

// wildcardMatch matches s against a pattern whose "*" match any run of
// bytes, by the same backtracking as glob.match.
func wildcardMatch(pattern, s string) bool {
	pi, si := 0, 0
	star, starS := -1, 0
	for si < len(s) {
		switch {
		case pi < len(pattern) && pattern[pi] == '*':
			star, starS = pi, si
			pi++
		case pi < len(pattern) && pattern[pi] == s[si]:
			pi++
			si++
		case star >= 0:
			starS++
			pi, si = star+1, starS
		default:
			return false
		}
	}
	for pi < len(pattern) && pattern[pi] == '*' {
		pi++
	}
	return pi == len(pattern)
}
