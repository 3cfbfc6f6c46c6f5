package rls

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// ApplyAll compiles the policies with a domain of every configuration and
// puts them in service as one table, as Apply does for one. Each keeps
// its own namespace (its Redis keys): the service reads envoyproxy/ratelimit
// files and the operator's compiled policies side by side. A domain in two
// of them is refused, and the table in service stays.
func (s *Service) ApplyAll(ctx context.Context, cfgs ...*config.Config) error {
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
	}
	if len(dup) > 0 {
		slices.Sort(dup)
		return fmt.Errorf("compile domains: %s defined by two configurations", strings.Join(dup, ", "))
	}
	s.table.Store(t)
	s.guard.Release(ctx)
	return nil
}
