package proxy

import (
	"fmt"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/route"
)

// Snapshot is one configuration in service: the route table and the Redis
// backend of each policy. It is immutable; a reload builds a new one and the
// Handler swaps it in atomically, so a request is decided by one
// configuration from start to end.
type Snapshot struct {
	// Config is the configuration of this pod (its policies only).
	Config *config.Config
	Table  *route.Table

	backends []*Backend // distinct, in policy order
	// single is the only backend when every policy uses the same one (the
	// common case, which then needs no per-check lookup).
	single    *Backend
	backendOf map[*route.Policy]*Backend
	policies  map[string]*route.Policy
	// protocol is how the policies forward to the application; empty when
	// no policy selects the pod (the Handler's default applies).
	protocol config.UpstreamProtocol
}

// NewSnapshot compiles cfg (already reduced to this pod's policies) and
// finds each policy's backend.
func NewSnapshot(cfg *config.Config, backends *Backends) (*Snapshot, error) {
	protocol, err := upstreamProtocol(cfg)
	if err != nil {
		return nil, err
	}
	table, err := route.New(cfg)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Config: cfg, Table: table, backendOf: map[*route.Policy]*Backend{}, policies: map[string]*route.Policy{},
		protocol: protocol}
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

// upstreamProtocol is the one protocol cfg's policies forward with. The
// manager refuses policies that would give one pod two; a configuration
// that does anyway (a hand-written --policy-file) is refused, so that the
// enforcer keeps the one it runs.
func upstreamProtocol(cfg *config.Config) (config.UpstreamProtocol, error) {
	var protocol config.UpstreamProtocol
	var first string
	for i := range cfg.Policies {
		p := &cfg.Policies[i]
		switch got := p.UpstreamProtocol.OrDefault(); {
		case protocol == "":
			protocol, first = got, p.Name
		case got != protocol:
			return "", fmt.Errorf("policies %s and %s select this pod with different upstreamProtocol (%s, %s): "+
				"its enforcer speaks one protocol to the application; give both policies the same one", first, p.Name, protocol, got)
		}
	}
	return protocol, nil
}

func containsBackend(bs []*Backend, be *Backend) bool {
	for _, b := range bs {
		if b == be {
			return true
		}
	}
	return false
}

// Backends are the backends the snapshot's policies use.
func (s *Snapshot) Backends() []*Backend { return s.backends }

// BackendOf is the backend of policy p.
func (s *Snapshot) BackendOf(p *route.Policy) *Backend {
	if s.single != nil {
		return s.single
	}
	return s.backendOf[p]
}

// UpstreamProtocol is how this configuration's policies forward to the
// application, empty when no policy selects the pod.
func (s *Snapshot) UpstreamProtocol() config.UpstreamProtocol { return s.protocol }

// Policy is the compiled policy named name, or nil.
func (s *Snapshot) Policy(name string) *route.Policy { return s.policies[name] }
