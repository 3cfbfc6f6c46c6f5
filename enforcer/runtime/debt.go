package runtime

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// Debt reads how far each window of req's bucket is below empty from
// costs its answers reported (responseCost), bounded by timeout.
func (be *Backend) Debt(ctx context.Context, req limiter.Request, timeout time.Duration) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return be.redis.Debt(ctx, req)
}
