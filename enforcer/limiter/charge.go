package limiter

import (
	"fmt"
)

// chargeScript charges or gives back units after the answer (charge.lua),
// for every algorithm that can: its keys and arguments are the algorithm's.
var chargeScript = newScript("charge.lua")

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
