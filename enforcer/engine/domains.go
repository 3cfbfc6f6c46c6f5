package engine

import (
	"fmt"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// NewDomainSnapshot is the snapshot of a rate limit service's
// configuration (cmd/ratelimit): its policies have a domain, which the
// route table leaves out, so they are kept apart, each with its backend,
// for what reports on them (/status, readiness). Envoy's calls are not
// decided through the snapshot but by enforcer/rls.
func NewDomainSnapshot(cfg *config.Config, backends *Backends) (*Snapshot, error) {
	s, err := NewSnapshot(cfg, backends)
	if err != nil {
		return nil, err
	}
	for i := range cfg.Policies {
		cp := &cfg.Policies[i]
		if cp.Domain == "" {
			continue
		}
		p := &rules.Policy{Name: cp.Name, UID: cp.UID, Generation: cp.Generation, DryRun: cp.Mode == config.ModeDryRun,
			RedisURLEnv: cp.RedisURLEnv, Failure: limiter.FailureOf(cp)}
		be, err := backends.For(p)
		if err != nil {
			return nil, fmt.Errorf("domain %s: %w", cp.Domain, err)
		}
		s.backendOf[p] = be
		s.domains = append(s.domains, p)
		if s.domainBackend == nil {
			s.domainBackend = map[string]*Backend{}
		}
		s.domainBackend[cp.Domain] = be
		if !containsBackend(s.backends, be) {
			s.backends = append(s.backends, be)
		}
	}
	s.single = nil
	if len(s.backends) == 1 {
		s.single = s.backends[0]
	}
	return s, nil
}

// DomainBackend is the backend of the policy with domain, nil when no
// policy of a rate limit service's snapshot has it.
func (s *Snapshot) DomainBackend(domain string) *Backend { return s.domainBackend[domain] }

// Policies are every policy the snapshot reports on: the route table's,
// then those with a domain of a rate limit service's snapshot. A policy
// with a domain has no rules here: Snapshot.Policy does not find it.
func (s *Snapshot) Policies() []*rules.Policy {
	if len(s.domains) == 0 {
		return s.Table.Policies()
	}
	return append(append([]*rules.Policy(nil), s.Table.Policies()...), s.domains...)
}

// Default is the backend of the default Redis, connecting on first use.
func (b *Backends) Default() (*Backend, error) {
	return b.For(&rules.Policy{Name: DefaultBackend})
}

// Redis is the backend's script runner, for a program that asks Redis
// without a Guard (a rate limit service's checks that count nothing).
func (be *Backend) Redis() *limiter.Redis { return be.redis }
