package limiter

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// onceCmd is a script call that go-redis must not send again on its own.
// go-redis resends a command after a lost connection or a read timeout
// (in a Cluster, within MaxRedirects, whatever MaxRetries says), which
// for a decision that did run would count it twice. It still follows
// MOVED and ASK, which say the command did not run where it was sent;
// replies that say it did not run at all are retried by the limiter
// (notRun).
type onceCmd struct{ *redis.Cmd }

// NoRetry keeps go-redis from resending the command.
func (onceCmd) NoRetry() bool { return true }

func newOnceCmd(ctx context.Context, args ...any) onceCmd {
	return onceCmd{redis.NewCmd(ctx, args...)}
}

// notRun reports whether err is a reply by which Redis says it did not run
// the command, so that sending it again cannot count anything twice:
// TRYAGAIN (a Cluster slot migrating, the keys of one bucket split between
// two nodes for a moment), CLUSTERDOWN (a shard without a primary until a
// replica is promoted), LOADING and MASTERDOWN.
func notRun(err error) bool {
	for _, prefix := range []string{"TRYAGAIN", "CLUSTERDOWN", "LOADING", "MASTERDOWN"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}

// unsent reports whether err says that a command never ran: Redis said so
// (notRun), or it was never written because no connection could be made
// or had.
func unsent(err error) bool {
	var op *net.OpError
	return notRun(err) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.As(err, &op) && op.Op == "dial"
}

const (
	// firstRetry is the wait before a call that did not run is sent again;
	// it doubles up to lastRetry while the decision's budget lasts. A slot
	// migration splits a bucket for the time one MIGRATE takes.
	firstRetry = time.Millisecond
	lastRetry  = 50 * time.Millisecond
)

// pause waits before the attempt-th resend of a call that did not run,
// and reports false when ctx ends first: the call's budget is spent.
func pause(ctx context.Context, attempt int) bool {
	d := min(firstRetry<<min(attempt, 10), lastRetry)
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
