package rls

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// ApplyAll compiles the policies with a domain of every configuration and
// puts them in service as one table, as Apply does for one. Each keeps
// its own namespace (its Redis keys): the service reads envoyproxy/ratelimit
// files and the operator's compiled policies side by side. A domain in two
// of them is refused, and the table in service stays.
func (s *Service) ApplyAll(ctx context.Context, cfgs ...*config.Config) error {
	return s.ApplyAllOn(ctx, nil, cfgs...)
}

// ApplyAllOn is ApplyAll deciding each domain on the backend backendOf
// returns for its policy (nil: the service's own). An error of backendOf
// refuses the configurations, and the table in service stays. Once the
// new table is in service, every backend of the old and the new one gives
// back its leases, taken under the old limits: those of a backend no
// domain uses any more as well.
func (s *Service) ApplyAllOn(ctx context.Context, backendOf func(*config.Policy) (*Backend, error), cfgs ...*config.Config) error {
	t := &Table{domains: map[string]*domain{}}
	var dup []string
	for _, cfg := range cfgs {
		one, err := NewTable(cfg)
		if err != nil {
			return err
		}
		for name, d := range one.domains {
			if _, seen := t.domains[name]; seen {
				dup = append(dup, name)
				continue
			}
			t.domains[name] = d
		}
		if backendOf == nil {
			continue
		}
		for i := range cfg.Policies {
			p := &cfg.Policies[i]
			d := one.domains[p.Domain]
			if p.Domain == "" || d == nil || t.domains[p.Domain] != d {
				continue
			}
			be, err := backendOf(p)
			if err != nil {
				return err
			}
			d.backend = be
		}
	}
	if len(dup) > 0 {
		slices.Sort(dup)
		return fmt.Errorf("compile domains: %s defined by two configurations", strings.Join(dup, ", "))
	}
	old := s.table.Swap(t)
	released := map[*limiter.Guard]bool{}
	for _, tab := range []*Table{old, t} {
		for _, be := range tab.backends(s.def) {
			if !released[be.Guard] {
				released[be.Guard] = true
				be.Guard.ReturnLeases(ctx)
			}
		}
	}
	return nil
}
