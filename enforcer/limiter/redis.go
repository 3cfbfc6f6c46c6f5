package limiter

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Redis decides requests with one atomic Lua call per rule against a Redis
// server, Sentinel-managed primary or Cluster. It has no failure handling of
// its own: Guard adds the policies' failure modes.
type Redis struct {
	client redis.UniversalClient
	// pipe sends the script calls: go-redis' autopipeliner coalesces the
	// decisions of concurrent requests into pipelined batches, so many
	// goroutines share few round trips.
	pipe *redis.AutoPipeliner
}

// NewRedis decides with client; it does not take ownership of client.
func NewRedis(client redis.UniversalClient) (*Redis, error) {
	pipe, err := client.AsyncAutoPipeline()
	if err != nil {
		return nil, fmt.Errorf("start redis autopipeline: %w", err)
	}
	return &Redis{client: client, pipe: pipe}, nil
}

// Close stops the autopipeliner after it has flushed what it holds.
func (r *Redis) Close() error { return r.pipe.Close() }

// Client is the client the limiter decides with.
func (r *Redis) Client() redis.UniversalClient { return r.client }

// Allow decides req against Redis; a Redis failure is returned as an error
// with a zero Decision.
func (r *Redis) Allow(ctx context.Context, req Request) (Decision, error) {
	if err := req.Validate(); err != nil {
		return Decision{}, err
	}
	return r.check(ctx, &req, req.Cost)
}

// Peek reports the state of req's bucket as Allow would see it, without
// consuming anything: Remaining and Reset of the deciding window, and
// whether req.Cost would fit now.
func (r *Redis) Peek(ctx context.Context, req Request) (Decision, error) {
	if err := req.Validate(); err != nil {
		return Decision{}, err
	}
	d, err := r.check(ctx, &req, 0)
	if err != nil {
		return d, err
	}
	// A read with cost 0 always fits; say whether req.Cost would.
	d.Allowed = d.Remaining >= req.Cost
	return d, nil
}

func (r *Redis) check(ctx context.Context, req *Request, cost int64) (Decision, error) {
	reply, err := r.run(ctx, req, cost)
	if err != nil {
		return Decision{}, fmt.Errorf("redis %s %s: %w", req.Algorithm, req.Bucket, err)
	}
	allowed, now, results, err := parseReply(reply, len(req.Windows))
	if err != nil {
		return Decision{}, fmt.Errorf("redis %s %s: %w", req.Algorithm, req.Bucket, err)
	}
	return decide(req, allowed, now, results), nil
}

// run sends the script deciding req and waits for its reply no longer than
// ctx allows. A Redis without the script gets it loaded by one EVAL.
func (r *Redis) run(ctx context.Context, req *Request, cost int64) (any, error) {
	script, args := evalSHA(req, cost)
	cmd := redis.NewCmd(ctx, args...)
	err := r.pipe.Submit(ctx, cmd).WaitContext(ctx)
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = redis.NewCmd(ctx, script.eval(args)...)
		err = r.pipe.Submit(ctx, cmd).WaitContext(ctx)
	}
	if err != nil {
		return nil, err
	}
	return cmd.Val(), nil
}
