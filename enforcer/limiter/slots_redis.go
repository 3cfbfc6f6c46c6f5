package limiter

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
)

// run sends the give-backs as they come, one batch at a time, and renews
// the slots held every SlotRenewal, until close.
func (t *slotTable) run(r *Redis) {
	defer close(t.done)
	tick := time.NewTicker(SlotRenewal)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			t.flush(r)
			return
		case <-t.wake:
			// gather the give-backs of a burst into one batch
			time.Sleep(flushLinger)
			t.flush(r)
		case <-tick.C:
			t.renew(r)
			t.flush(r)
		}
	}
}

// flush sends the waiting give-backs in one pipelined round trip; the ones
// that fail wait for the next try.
func (t *slotTable) flush(r *Redis) {
	t.mu.Lock()
	batch := t.returns
	t.returns = nil
	t.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	reqs := make([]Request, len(batch))
	units := make([]int64, len(batch))
	taken := make([]int64, len(batch))
	for i, b := range batch {
		reqs[i], units[i], taken[i] = b.req, b.n, b.taken
	}
	ctx, cancel := context.WithTimeout(context.Background(), slotCallTimeout)
	defer cancel()
	var failed []slotReturn
	for i, err := range r.pipelined(ctx, reqs, units, taken) {
		// Sent again only when Redis surely did not run it: a give-back
		// whose reply alone was lost (a timeout, a reset connection) may
		// have run, and running twice would free a slot still held. One
		// that is not sent again leaves its slot counted until this
		// enforcer holds none of the tenant's slots for SlotExpiry.
		if err != nil && unsent(err) {
			failed = append(failed, batch[i])
		}
	}
	if len(failed) > 0 {
		t.mu.Lock()
		// the generation in Redis ignores a give-back once its slot was
		// dropped; newer ones after it
		t.returns = append(failed, t.returns...)
		if len(t.returns) > maxReturns {
			t.returns = t.returns[:maxReturns]
		}
		t.mu.Unlock()
	}
}

// flushLinger is how long the flusher waits for more give-backs once one
// comes: a slot is free again in Redis at most that much later, and a busy
// enforcer sends its give-backs in a few large batches instead of many
// small ones.
const flushLinger = time.Millisecond

// slotCallTimeout bounds a batch of give-backs or renewals.
const slotCallTimeout = 2 * time.Second

// renew pushes back the expiry of every bucket this enforcer holds slots
// in, in one pipelined round trip.
func (t *slotTable) renew(r *Redis) {
	t.mu.Lock()
	reqs := make([]*Request, 0, len(t.buckets))
	for _, b := range t.buckets {
		reqs = append(reqs, &b.req)
	}
	t.mu.Unlock()
	gens := make([]int64, len(reqs))
	if len(reqs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), slotCallTimeout)
	defer cancel()
	calls := make([]scriptCall, len(reqs))
	var stack [192]byte
	for i, req := range reqs {
		key := string(req.Bucket.appendKey(stack[:0], Concurrency, req.Windows[0].Period))
		calls[i] = r.send(ctx, []any{"evalsha", renewScript.shaArg, 1, key, enforcerID, req.Windows[0].Period.Milliseconds()})
	}
	for i, c := range calls {
		raw, err := r.receive(ctx, renewScript, c)
		if err != nil {
			gens[i] = -1 // unknown; the next renewal tries again
			continue
		}
		if gens[i], _ = raw.(int64); gens[i] == 0 {
			gens[i] = math.MaxInt64 // its fields are gone, and its slots with them
		}
	}
	t.mu.Lock()
	for i, req := range reqs {
		if b := t.buckets[req.Bucket]; b != nil && gens[i] >= 0 {
			b.gen = gens[i]
		}
	}
	t.mu.Unlock()
}

// close stops the background work after a last flush.
func (t *slotTable) close() {
	t.start.Do(func() {}) // no start after this one
	if !t.running.Load() {
		return
	}
	close(t.stop)
	select {
	case <-t.done:
	case <-time.After(2 * slotCallTimeout):
	}
}

// pipelined gives back units[i], taken at taken[i], to the bucket of
// reqs[i], all in one explicit pipeline of its own (a round trip apart
// from the request path's autopipelined decisions), and reports each one's
// error. A Redis without the script loads it with EVAL.
func (r *Redis) pipelined(ctx context.Context, reqs []Request, units, taken []int64) []error {
	pipe := r.client.Pipeline()
	cmds := make([]onceCmd, len(reqs))
	args := make([][]any, len(reqs))
	scripts := make([]algorithmScript, len(reqs))
	for i := range reqs {
		scripts[i], args[i] = evalSHA(&reqs[i], -units[i], taken[i], taken[i])
		// sent once: a give-back sent twice would free slots still held
		cmds[i] = newOnceCmd(ctx, args[i]...)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx)
	errs := make([]error, len(reqs))
	var retry redis.Pipeliner
	again := map[int]onceCmd{}
	for i, c := range cmds {
		if err := c.Err(); redis.HasErrorPrefix(err, "NOSCRIPT") {
			if retry == nil {
				retry = r.client.Pipeline()
			}
			again[i] = newOnceCmd(ctx, scripts[i].eval(args[i])...)
			_ = retry.Process(ctx, again[i])
		} else if err != nil {
			errs[i] = fmt.Errorf("redis give-back %s: %w", reqs[i].Bucket, err)
		}
	}
	if retry != nil {
		_, _ = retry.Exec(ctx)
		for i, c := range again {
			if err := c.Err(); err != nil {
				errs[i] = fmt.Errorf("redis give-back %s: %w", reqs[i].Bucket, err)
			}
		}
	}
	return errs
}
