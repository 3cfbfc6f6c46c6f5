package compile

import (
	"net/http"
	"slices"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

func responseCost(rc *v1alpha1.ResponseCost) *config.ResponseCost {
	if rc == nil {
		return nil
	}
	out := &config.ResponseCost{JSONUsage: rc.JSONUsage}
	if rc.UnfinishedCost != nil {
		out.UnfinishedCost = *rc.UnfinishedCost
	}
	if rc.Header != "" {
		out.Header = http.CanonicalHeaderKey(rc.Header)
	}
	return out
}

func countResponses(c *v1alpha1.CountResponses) *config.CountResponses {
	if c == nil {
		return nil
	}
	out := &config.CountResponses{Statuses: slices.Clone(c.Statuses)}
	for _, name := range c.GRPCStatuses {
		// the CRD's enum holds names of config.GRPCCodes only; an unknown
		// one becomes -1, which config validation refuses with its path
		out.GRPCStatuses = append(out.GRPCStatuses, slices.Index(config.GRPCCodes, string(name)))
	}
	return out
}
