package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated is a decision of a Replicated policy whose count no
// replica acknowledged within the policy's timeout: the primary has it, but
// a failover could lose it, so it is a Redis failure for the failure mode.
var ErrNotReplicated = errors.New("no replica acknowledged the count in time")

// replicatedResult is the outcome of a decision sent with sendReplicated.
type replicatedResult struct {
	cmd *redis.Cmd
	err error
}

// sendReplicated runs a decision's script, then WAIT 1, on one connection
// to the primary that holds its keys, so that WAIT covers that very write
// (the autopipeliner could send them on different connections). It does
// not wait: receive reads the result. A policy that pays for this is rare,
// and its decisions take a connection each for the round trip to the
// replica.
func (r *Redis) sendReplicated(ctx context.Context, s algorithmScript, args []any, timeout time.Duration) scriptCall {
	done := make(chan replicatedResult, 1)
	go func() {
		cmd, err := r.runReplicated(ctx, s, args, timeout)
		done <- replicatedResult{cmd: cmd, err: err}
	}()
	return scriptCall{args: args, replicated: done}
}

func (r *Redis) runReplicated(ctx context.Context, s algorithmScript, args []any, timeout time.Duration) (*redis.Cmd, error) {
	// WAIT's own timeout: three quarters of what the decision's budget
	// has left, so that its answer (0 replicas) arrives before the budget,
	// or the client's read timeout of the same second, runs out; never 0,
	// which would block for ever.
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	waitMs := max(timeout.Milliseconds()*3/4, 1)
	// exchange sends the call and WAIT on one connection to node; asking
	// first sends ASKING, so that a node importing the call's slot runs it.
	exchange := func(node redis.Cmdable, asking bool, args []any) (*redis.Cmd, *redis.IntCmd) {
		cmd, wait := redis.NewCmd(ctx, args...), redis.NewIntCmd(ctx, "wait", 1, waitMs)
		_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
			if asking {
				_ = p.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
			}
			_ = p.Process(ctx, cmd)
			_ = p.Process(ctx, wait)
			return nil
		})
		return cmd, wait
	}
	var cmd *redis.Cmd
	var wait *redis.IntCmd
	// ask is the node an ASK reply sent the call to, nil for the slot's
	// primary
	var ask redis.Cmdable
	for attempt, evaled := 0, false; ; {
		node := ask
		if node == nil {
			primary, err := r.primaryFor(ctx, args)
			if err != nil {
				return nil, err
			}
			node = primary
		}
		cmd, wait = exchange(node, ask != nil, args)
		err := cmd.Err()
		if err == nil {
			break
		}
		asked := ask
		ask = nil
		if addr, ok := redis.IsAskError(err); ok && asked == nil {
			// The slot is moving and the call's keys have gone to addr:
			// the call is sent there at once, with its WAIT, so that the
			// replica acknowledging it is addr's. A node missing from the
			// client's map is waited for as a MOVED is.
			if ask = r.masterAt(ctx, addr); ask != nil {
				continue
			}
		}
		switch {
		case redis.HasErrorPrefix(err, "NOSCRIPT") && !evaled:
			args, evaled, ask = s.eval(args), true, asked
			continue
		case redis.HasErrorPrefix(err, "MOVED"), redis.HasErrorPrefix(err, "ASK"):
			// the slot moved since the client last read the cluster's map:
			// read it again, and send the call to the primary serving it
			if cc, ok := r.client.(*redis.ClusterClient); ok {
				cc.ReloadState(ctx)
			}
		case !notRun(err):
			return nil, err
		}
		if !pause(ctx, attempt) {
			return nil, err
		}
		attempt++
	}
	acked, err := wait.Result()
	if err != nil {
		return nil, fmt.Errorf("wait for a replica: %w", err)
	}
	if acked < 1 {
		return nil, fmt.Errorf("%w (%d ms)", ErrNotReplicated, waitMs)
	}
	return cmd, nil
}

// primaryFor is the client of the primary holding the keys of the EVALSHA
// args ("evalsha", sha, numkeys, key...): in a cluster, the master of the
// first key's slot; otherwise the client itself (a Sentinel client talks
// to the primary only).
func (r *Redis) primaryFor(ctx context.Context, args []any) (redis.Cmdable, error) {
	cc, ok := r.client.(*redis.ClusterClient)
	if !ok {
		return r.client, nil
	}
	key, _ := args[3].(string)
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("find the primary of %s: %w", key, err)
	}
	return node, nil
}

// masterAt is the client the cluster client keeps for the master at addr,
// nil when it knows none there (or r is not a cluster's).
func (r *Redis) masterAt(ctx context.Context, addr string) redis.Cmdable {
	cc, ok := r.client.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	var mu sync.Mutex
	var found *redis.Client
	_ = cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			found = c
			mu.Unlock()
		}
		return nil
	})
	if found == nil {
		return nil
	}
	return found
}
