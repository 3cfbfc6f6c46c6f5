package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// chargeScript charges or gives back units after the answer (charge.lua),
// for every algorithm that can: its keys and arguments are the algorithm's.
var chargeScript = newScript("charge.lua")

// Charge settles, after the answer, what admitted decisions took: units[i]
// more of reqs[i]'s windows (units[i] > 0) or units back (< 0), counted[i]
// being the decision's CountedAt. It is one pipelined round trip, one
// script call per request over all its windows, and waits no longer than
// the longest failure timeout of reqs. A charge always lands, into debt if
// it must (charge.lua); a give back has a refund's caps. Rules whose cost
// the answer reports do not lease (NewRule), so every unit is in Redis.
// Debt[i] is the deepest debt of reqs[i]'s windows after the call.
func (g *Guard) Charge(ctx context.Context, reqs []Request, units []int64, counted []time.Time) (debt []int64, err error) {
	if len(reqs) == 0 || g.skipping() {
		return nil, nil
	}
	timeout := reqs[0].Failure.timeout()
	for i := range reqs {
		timeout = max(timeout, reqs[i].Failure.timeout())
		g.leases.counts(reqs[i].Bucket.Policy).RedisCalls.Add(1)
		// a cached refusal of the bucket would not see room given back
		g.cache.forget(windowsKey(&reqs[i]))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	calls := make([]scriptCall, len(reqs))
	for i := range reqs {
		calls[i] = g.redis.send(ctx, chargeCmd(&reqs[i], units[i], counted[i].UnixMicro()))
	}
	debt = make([]int64, len(reqs))
	errs := make([]error, len(reqs))
	for i, c := range calls {
		raw, err := g.redis.receive(ctx, chargeScript, c)
		if err == nil {
			debt[i], err = parseChargeReply(raw, len(reqs[i].Windows))
		}
		if err != nil {
			errs[i] = fmt.Errorf("redis charge %s: %w", reqs[i].Bucket, err)
		}
	}
	return debt, errors.Join(errs...)
}

// chargeCmd is the EVALSHA of charge.lua settling units of req counted at
// counted (µs): the keys of req's windows, its algorithm's code, units,
// counted, then each window's arguments.
func chargeCmd(req *Request, units, counted int64) []any {
	d := descriptorOf(req.Algorithm)
	n := len(req.Windows)
	cmd := make([]any, 0, 6+4*n)
	cmd = append(cmd, "evalsha", chargeScript.shaArg, n)
	var stack [192]byte
	buf := req.Bucket.appendKeyPrefix(stack[:0], req.Algorithm)
	prefix := len(buf)
	for _, w := range req.Windows {
		buf = appendPeriodLabel(buf[:prefix], w.Period)
		cmd = append(cmd, string(buf))
	}
	cmd = append(cmd, d.code, units, counted)
	for _, w := range req.Windows {
		cmd = d.args(cmd, w)
	}
	return cmd
}

// parseChargeReply reads {now_µs, debt...} into the deepest debt.
func parseChargeReply(raw any, windows int) (int64, error) {
	vals, ok := raw.([]any)
	if !ok || len(vals) != 1+windows {
		return 0, fmt.Errorf("unexpected charge reply %v", raw)
	}
	var debt int64
	for _, v := range vals[1:] {
		n, ok := v.(int64)
		if !ok {
			return 0, fmt.Errorf("unexpected charge reply element %v", v)
		}
		debt = max(debt, n)
	}
	return debt, nil
}

// Charges reports whether the algorithm can settle a cost after the
// answer (charge.lua): every one but SlidingWindowLog.
func Charges(a Algorithm) bool {
	return a == FixedWindow || a == SlidingWindowCounter || a == TokenBucket || a == GCRA
}
