// Package engine is what a deciding program runs on, whatever it answers
// (the HTTP proxy, a rate limit service): the Redis backends of the
// policies, the snapshot of a configuration in service, and the recorders
// of what is decided. It links no HTTP proxy and no transport to the
// application.
package engine

import (
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// Snapshot is one configuration in service: the route table and the Redis
// backend of each policy. It is immutable; a reload builds a new one and the
// program swaps it in atomically, so a request is decided by one
// configuration from start to end.
type Snapshot struct {
	// Config is the configuration of this pod (its policies only).
	Config *config.Config
	Table  *rules.Table

	backends []*Backend // distinct, in policy order
	// single is the only backend when every policy uses the same one (the
	// common case, which then needs no per-check lookup).
	single    *Backend
	backendOf map[*rules.Policy]*Backend
	policies  map[string]*rules.Policy
	// domains are the policies with a domain of a rate limit service's
	// snapshot (domains.go); the route table leaves them out.
	domains []*rules.Policy
	// domainBackend is the backend of each domain of domains.
	domainBackend map[string]*Backend
}

// NewSnapshot compiles cfg (already reduced to this pod's policies) and
// finds each policy's backend.
func NewSnapshot(cfg *config.Config, backends *Backends) (*Snapshot, error) {
	table, err := rules.New(cfg)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Config: cfg, Table: table, backendOf: map[*rules.Policy]*Backend{}, policies: map[string]*rules.Policy{}}
	for _, p := range table.Policies() {
		be, err := backends.For(p)
		if err != nil {
			return nil, err
		}
		s.backendOf[p] = be
		s.policies[p.Name] = p
		if !containsBackend(s.backends, be) {
			s.backends = append(s.backends, be)
		}
	}
	if len(s.backends) == 1 {
		s.single = s.backends[0]
	}
	return s, nil
}

func containsBackend(bs []*Backend, be *Backend) bool {
	for _, b := range bs {
		if b == be {
			return true
		}
	}
	return false
}

// Single is the only backend when every policy uses the same one, nil
// otherwise: a request's checks then need no lookup of their backend.
func (s *Snapshot) Single() *Backend { return s.single }

// Backends are the backends the snapshot's policies use.
func (s *Snapshot) Backends() []*Backend { return s.backends }

// BackendOf is the backend of policy p.
func (s *Snapshot) BackendOf(p *rules.Policy) *Backend {
	if s.single != nil {
		return s.single
	}
	return s.backendOf[p]
}

// Policy is the compiled policy named name, or nil.
func (s *Snapshot) Policy(name string) *rules.Policy { return s.policies[name] }

// Adopt carries the adaptive state of prev, the snapshot in service, into
// s before s is put into service, so that a reload neither lifts a
// tightened limit nor loses measurements. A nil prev leaves s as it is.
func (s *Snapshot) Adopt(prev *Snapshot) {
	if prev == nil {
		return
	}
	for _, p := range s.Table.Policies() {
		op := prev.Policy(p.Name)
		if op == nil {
			continue
		}
		for _, r := range p.Rules {
			if r.Adaptive == nil {
				continue
			}
			for _, or := range op.Rules {
				if or.Name == r.Name {
					_ = s.Table.Scaling(r).Adopt(prev.Table.Scaling(or)) // scaling windows NewRule accepted at 100% cannot fail
				}
			}
		}
	}
}
