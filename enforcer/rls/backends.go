package rls

import (
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// Backend is a Redis the service decides domains on: its Guard, which
// counts, and its script runner, for the checks that count nothing. A
// program with several (cmd/ratelimit, one per policy's Redis) resolves
// each domain's at ApplyAllOn.
type Backend struct {
	Guard *limiter.Guard
	Redis *limiter.Redis
}

// backendOf is the backend deciding domain d.
func (s *Service) backendOf(d *domain) *Backend {
	if d != nil && d.backend != nil {
		return d.backend
	}
	return s.def
}

// backends are the distinct backends of t's domains, and def; none for a
// nil table.
func (t *Table) backends(def *Backend) []*Backend {
	if t == nil {
		return nil
	}
	out := []*Backend{def}
	for _, d := range t.domains {
		if d.backend != nil && !hasGuard(out, d.backend.Guard) {
			out = append(out, d.backend)
		}
	}
	return out
}

func hasGuard(bs []*Backend, g *limiter.Guard) bool {
	for _, b := range bs {
		if b.Guard == g {
			return true
		}
	}
	return false
}

// backendGroup is the indexes of the requests that go to one backend.
type backendGroup struct {
	backend *Backend
	index   []int
}

// groupByBackend groups the indexes of on by backend (by Guard: two
// Backends of one Guard are one Redis), in order of first use.
func groupByBackend(on []*Backend) []backendGroup {
	var out []backendGroup
next:
	for i, be := range on {
		for k := range out {
			if out[k].backend.Guard == be.Guard {
				out[k].index = append(out[k].index, i)
				continue next
			}
		}
		out = append(out, backendGroup{backend: be, index: []int{i}})
	}
	return out
}
