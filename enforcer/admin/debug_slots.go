package admin

import (
	"context"

	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// tenantSlots completes the usage of a Concurrency rule (whose window is
// concurrent slots, not a rate: WindowLimit): the enforcers holding the
// tenant's slots are listed by name, and a refusal's Retry-After is the
// one the proxy would give.
func tenantSlots(ctx context.Context, be *engine.Backend, req *limiter.Request, usage *debugapi.TenantUsage) error {
	if req.Algorithm != limiter.Concurrency {
		return nil
	}
	if !usage.Allowed && usage.Ban == nil {
		wait := be.Guard.SlotWait(req)
		usage.RetryAfter, usage.RetryAfterSeconds = wait, retryAfterSeconds(wait)
	}
	ctx, cancel := context.WithTimeout(ctx, peekTimeout)
	defer cancel()
	holders, err := be.Guard.SlotHolders(ctx, req)
	usage.Slots = make([]debugapi.SlotHolder, len(holders))
	for i, h := range holders {
		usage.Slots[i] = debugapi.SlotHolder{Enforcer: h.Enforcer, Slots: h.Slots, Expires: h.Expires, Local: h.Local}
	}
	return err
}
