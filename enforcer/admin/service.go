package admin

import (
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/status"
)

// DecisionSource gives the decisions of each policy since the program
// started, as /status reports them (a *metrics.Metrics, or a rate limit service's
// own counts).
type DecisionSource interface {
	Decisions() map[string]status.DecisionCounts
}

// decisions are Options.Decisions', else Options.Metrics'.
func (s *Server) decisions() map[string]status.DecisionCounts {
	switch {
	case s.opts.Decisions != nil:
		return s.opts.Decisions.Decisions()
	case s.opts.Metrics != nil:
		return s.opts.Metrics.Decisions()
	}
	return map[string]status.DecisionCounts{}
}

// readiness is Options.Readiness' answer when set, else the enforcer's
// rule on snap (readiness in status.go).
func (s *Server) readiness(snap *engine.Snapshot) (bool, string) {
	if s.opts.Readiness != nil {
		return s.opts.Readiness()
	}
	return readiness(snap)
}
