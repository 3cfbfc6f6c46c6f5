package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis decides requests with one atomic Lua call per rule against a Redis
// server, Sentinel-managed primary or Cluster. It has no failure handling of
// its own: Guard adds the policies' failure modes.
type Redis struct {
	client redis.UniversalClient // for pings
	// pipe sends the script calls: go-redis' autopipeliner coalesces the
	// decisions of concurrent requests into pipelined batches, so many
	// goroutines share few round trips.
	pipe *redis.AutoPipeliner
	// now is the clock calendar windows are computed at before Redis'
	// TIME checks them (calendar.go); nil is time.Now. Tests move it.
	now func() time.Time
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

// Peek reports the state of req's bucket as Allow would decide req now,
// without consuming anything: the deciding window's Limit, Remaining and
// Reset, whether req.Cost fits and, when it does not, RetryAfter as a
// refusal would give it (the script's exact wait). For a rule with a Delay,
// a wait within it is reported as Allow reports a reservation (allowed,
// with Delay) and a longer one as refused for the wait less the Delay. The
// tenant's ban is not read here (Guard.BanOf reads it).
func (r *Redis) Peek(ctx context.Context, req Request) (Decision, error) {
	return r.startPeek(ctx, req).wait(ctx)
}

// PeekAll peeks every request of reqs as Peek does, all sent before any
// reply is read, so that they share a pipelined round trip; each waits no
// longer than its own policy's timeout from now, within ctx. errs[i] is
// reqs[i]'s failure, nil when ds[i] is Redis' answer.
func (r *Redis) PeekAll(ctx context.Context, reqs []Request) (ds []Decision, errs []error) {
	peeks := make([]pendingPeek, len(reqs))
	for i := range reqs {
		peeks[i] = r.startPeek(ctx, reqs[i])
	}
	ds, errs = make([]Decision, len(reqs)), make([]error, len(reqs))
	var deadlines budgets
	defer deadlines.cancel()
	now := time.Now()
	for i := range peeks {
		ds[i], errs[i] = peeks[i].wait(deadlines.get(ctx, now.Add(reqs[i].Failure.timeout())))
	}
	return ds, errs
}

// pendingPeek is a peek sent to Redis whose reply has not been read.
type pendingPeek struct {
	r     *Redis
	req   Request
	delay time.Duration
	call  scriptCall
	// script is the peek's; err is set for a request Rule.Request did not
	// build, which is never sent.
	script algorithmScript
	err    error
}

func (r *Redis) startPeek(ctx context.Context, req Request) pendingPeek {
	if !req.f.checked {
		return pendingPeek{err: errUncheckedRequest}
	}
	p := pendingPeek{r: r, delay: req.f.delay}
	// the bucket alone, booking nothing, by the script that can peek
	req.f.ban, req.f.delay, req.f.single = nil, 0, false
	var args []any
	p.script, args = evalSHA(&req, req.Cost, req.Cost, r.believedNow(&req))
	p.req, p.call = req, r.send(ctx, append(args, peekArg))
	return p
}

func (p pendingPeek) wait(ctx context.Context) (Decision, error) {
	if p.err != nil {
		return Decision{}, p.err
	}
	req := &p.req
	raw, err := p.r.receiveWindow(ctx, req, req.Cost, req.Cost, p.script, p.call, true)
	if err != nil {
		return Decision{}, fmt.Errorf("redis peek %s %s: %w", req.Algorithm, req.Bucket, err)
	}
	var stack [4]WindowResult
	// A peek takes nothing: its reply is read as a read's (cost 0).
	rep, err := parseReply(raw, descriptorOf(req.Algorithm), len(req.Windows), 0, false, stack[:0])
	if err != nil {
		return Decision{}, fmt.Errorf("redis peek %s %s: %w", req.Algorithm, req.Bucket, err)
	}
	d := decide(req, rep.allowed, rep.now, rep.results)
	if !d.Allowed && p.delay > 0 {
		// the scripts book a wait exactly when the longest window's wait,
		// RetryAfter, is within the delay
		if d.RetryAfter <= p.delay {
			d.Allowed, d.Delay, d.RetryAfter = true, d.RetryAfter, 0
		} else {
			reserved(&Request{f: features{delay: p.delay}}, &d, 0)
		}
	}
	return d, nil
}

// peekArg ends the arguments of a peek: the script decides and takes nothing.
const peekArg = "peek"

func (r *Redis) check(ctx context.Context, req *Request, cost int64) (Decision, error) {
	d, _, err := r.submit(ctx, req, cost, cost).wait(ctx)
	return d, err
}

// pendingCheck is a decision sent to Redis whose reply has not been read.
type pendingCheck struct {
	r      *Redis
	req    *Request
	cost   int64
	want   int64
	script algorithmScript
	call   scriptCall
}

// submit queues the script deciding req at cost without waiting, so several
// rules of one HTTP request travel in one pipelined round trip. want, when
// more than cost and req's algorithm leases, asks for a lease: up to want
// units taken at once when cost fits.
func (r *Redis) submit(ctx context.Context, req *Request, cost, want int64) pendingCheck {
	script, args := evalSHA(req, cost, want, r.believedNow(req))
	return pendingCheck{r: r, req: req, cost: cost, want: want, script: script, call: r.sendTaking(ctx, req, script, args, cost, want)}
}

// sendTaking sends a script call that may take units (cost, or a lease up
// to want): for a Replicated policy with a WAIT for a replica after it,
// else through the autopipeliner.
func (r *Redis) sendTaking(ctx context.Context, req *Request, s algorithmScript, args []any, cost, want int64) scriptCall {
	if req.Failure.Replicated && (cost > 0 || want > cost) {
		return r.sendReplicated(ctx, s, args, req.Failure.timeout())
	}
	return r.send(ctx, args)
}

// wait reads the decision and what it took from every window (its cost, or
// a lease's larger amount), no longer than ctx allows.
func (p pendingCheck) wait(ctx context.Context) (Decision, int64, error) {
	raw, err := p.r.receiveWindow(ctx, p.req, p.cost, p.want, p.script, p.call, false)
	if err != nil {
		return Decision{}, 0, fmt.Errorf("redis %s %s: %w", p.req.Algorithm, p.req.Bucket, err)
	}
	// decide keeps nothing of the results: for usual window counts they
	// stay on the stack.
	var stack [4]WindowResult
	var rep reply
	var ban BanState
	alg := descriptorOf(p.req.Algorithm)
	switch {
	case p.req.f.ban != nil && p.cost >= 0:
		rep, ban, err = parseBanReply(raw, p.req, p.cost, stack[:0])
	case alg.singleAnswer != nil && runsSingle(p.req, p.cost):
		rep, err = parseSingleReply(raw, alg, p.req.Windows[0], p.cost, stack[:0])
	default:
		rep, err = parseReply(raw, alg, len(p.req.Windows), p.cost, p.cost >= 0 && p.req.delays(), stack[:0])
	}
	if err != nil {
		return Decision{}, 0, fmt.Errorf("redis %s %s: %w", p.req.Algorithm, p.req.Bucket, err)
	}
	d := decide(p.req, rep.allowed, rep.now, rep.results)
	if p.req.delays() {
		reserved(p.req, &d, rep.wait)
	}
	if ban.Active() {
		applyBan(&d, ban)
	}
	return d, rep.taken, nil
}

// scriptCall is one EVALSHA in flight.
type scriptCall struct {
	args   []any
	cmd    onceCmd
	future redis.AutoFuture
	// replicated, when set, delivers a call sent with sendReplicated
	// instead of future.
	replicated <-chan replicatedResult
}

func (r *Redis) send(ctx context.Context, args []any) scriptCall {
	cmd := newOnceCmd(ctx, args...)
	return scriptCall{args: args, cmd: cmd, future: r.pipe.Submit(ctx, cmd)}
}

// receive waits for c's reply. A Redis without the script (restarted, or
// after SCRIPT FLUSH) answers NOSCRIPT; one EVAL then loads and runs it. A
// reply saying the script did not run (notRun: a Cluster slot migrating,
// a shard failing over) sends it again while ctx allows; nothing else is
// sent twice.
func (r *Redis) receive(ctx context.Context, s algorithmScript, c scriptCall) (any, error) {
	if c.replicated != nil {
		select {
		case res := <-c.replicated:
			if res.err != nil {
				return nil, res.err
			}
			return res.cmd.Val(), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	err := c.future.WaitContext(ctx)
	args, evaled := c.args, false
	for attempt := 0; err != nil; {
		switch {
		case redis.HasErrorPrefix(err, "NOSCRIPT") && !evaled:
			args, evaled = s.eval(c.args), true
		case notRun(err) && pause(ctx, attempt):
			attempt++
		default:
			return nil, err
		}
		c.cmd = newOnceCmd(ctx, args...)
		err = r.pipe.Submit(ctx, c.cmd).WaitContext(ctx)
	}
	return c.cmd.Val(), nil
}

// Refund gives back what admitted decisions of reqs took, because another
// rule refused the HTTP request they belong to; counted[i] is the
// decision's CountedAt. It waits for all of them, no longer than ctx allows.
func (r *Redis) Refund(ctx context.Context, reqs []Request, counted []time.Time) error {
	units := make([]int64, len(reqs))
	at := make([]int64, len(reqs))
	for i := range reqs {
		units[i], at[i] = reqs[i].Cost, counted[i].UnixMicro()
	}
	return errors.Join(r.giveBack(ctx, reqs, units, at)...)
}

// giveBack returns units[i], counted at counted[i] (µs, Redis' clock), to
// the windows of reqs[i], all in one pipelined round trip, and reports each
// one's error; it waits no longer than ctx allows. One that Redis says it
// did not run (a Cluster slot migrating: TRYAGAIN) is sent again while ctx
// allows (receive); nothing else is: a reply that is lost may or may not
// have given back, and sending it again could give back twice.
func (r *Redis) giveBack(ctx context.Context, reqs []Request, units, counted []int64) []error {
	calls := make([]scriptCall, len(reqs))
	scripts := make([]algorithmScript, len(reqs))
	for i := range reqs {
		var args []any
		// a calendar window's refund is sent the window of when it was counted
		scripts[i], args = evalSHA(&reqs[i], -units[i], counted[i], counted[i])
		calls[i] = r.send(ctx, args)
	}
	errs := make([]error, len(reqs))
	for i, c := range calls {
		if _, err := r.receive(ctx, scripts[i], c); err != nil {
			errs[i] = fmt.Errorf("redis refund %s: %w", reqs[i].Bucket, err)
		}
	}
	return errs
}
