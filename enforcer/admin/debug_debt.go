package admin

import (
	"context"

	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/route"
	"github.com/sluice-dev/sluice/enforcer/runtime"
)

// windowDebts fills in the debt of each window of a responseCost rule.
func windowDebts(ctx context.Context, be *runtime.Backend, rule *route.Rule, req limiter.Request, windows []WindowUsage) error {
	if rule.ResponseCost == nil || !limiter.Charges(req.Algorithm) {
		return nil
	}
	debt, err := be.Debt(ctx, req, peekTimeout)
	if err != nil {
		return err
	}
	for i := range windows {
		windows[i].Debt = debt[i]
	}
	return nil
}
