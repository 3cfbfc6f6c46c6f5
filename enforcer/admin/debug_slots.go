package admin

import (
	"context"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// tenantSlots completes the usage of a Concurrency rule (whose window is
// concurrent slots, not a rate: WindowLimit): the enforcers holding the
// tenant's slots are listed by name, and a refusal's Retry-After is the
// one the proxy would give.
func tenantSlots(ctx context.Context, be *engine.Backend, req *limiter.Request, usage *TenantUsage) error {
	if req.Algorithm != limiter.Concurrency {
		return nil
	}
	if !usage.Allowed && usage.Ban == nil {
		wait := be.Guard.SlotWait(req)
		usage.retryAfter, usage.RetryAfterSeconds = wait, retryAfterSeconds(wait)
	}
	ctx, cancel := context.WithTimeout(ctx, peekTimeout)
	defer cancel()
	holders, err := be.Guard.SlotHolders(ctx, req)
	usage.Slots = holders
	if usage.Slots == nil {
		usage.Slots = []limiter.Holder{}
	}
	return err
}
