package limiter

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

//go:embed *.lua
var luaFiles embed.FS

// algorithmScript is one algorithm's Lua script.
type algorithmScript struct {
	src, sha string
	// shaArg is sha as a command argument, boxed once rather than per call.
	shaArg any
}

func mustScript(name string) (src, sha string) {
	b, err := luaFiles.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("embedded script %s: %v", name, err)) // a build defect, not a runtime condition
	}
	sum := sha1.Sum(b)
	return string(b), hex.EncodeToString(sum[:])
}

func newScript(name string) algorithmScript {
	src, sha := mustScript(name)
	return algorithmScript{src: src, sha: sha, shaArg: sha}
}

// evalSHA is the whole EVALSHA command of req's algorithm with cost as
// ARGV[1] (0 reads without consuming, -n refunds n), then each window's
// arguments, then, for the algorithms that lease, extra: for a decision,
// want, the most units to take when cost fits (at least cost; more than
// cost is a lease); for a refund, the time the units were counted at (µs,
// Redis' clock), whose fixed window alone may take them back.
// EVALSHA sha numkeys key... cost arg... [extra]
//
// A decision of a rule with a ban runs the algorithm wrapped by ban.lua,
// whose keys (the ban's hash and refusal log) and arguments come first:
// EVALSHA sha numkeys bankey logkey key... banarg... cost arg... [want [delay]]
// A refund has nothing to do with the ban, and runs the algorithm alone.
//
// A decision of a rule NewRule found to have one period window, no delay
// and no ban runs the algorithm's single-window script instead, with the
// same keys and arguments, less want when it is cost.
//
// A calendar window's key and arguments are those of its window holding at
// (µs), which Redis' TIME checks (calendar.go).
func evalSHA(req *Request, cost, extra, at int64) (s algorithmScript, cmd []any) {
	d := descriptorOf(req.Algorithm)
	s = d.script
	single := runsSingle(req, cost)
	if single {
		s = d.single
	}
	ban := req.f.ban != nil && cost >= 0
	var banKeys, banArgs int
	if ban {
		s, banKeys, banArgs = banScripts[req.Algorithm], 2, len(req.f.ban.args)
	}
	// The windows' keys share everything but the period: that prefix is
	// built once, on the stack, and each key is one allocation. Room for
	// the cost, up to 4 arguments per window, want and delay, without
	// regrowing.
	n := len(req.Windows)
	cmd = make([]any, 0, 3+banKeys+n+banArgs+3+4*n)
	cmd = append(cmd, "evalsha", s.shaArg, banKeys+n)
	var stack [192]byte
	if ban {
		cmd = append(cmd, string(req.Bucket.appendBanKey(stack[:0], "ban")), string(req.Bucket.appendBanKey(stack[:0], "bandenials")))
	}
	buf := req.Bucket.appendKeyPrefix(stack[:0], req.Algorithm)
	prefix := len(buf)
	var bounds [maxWindows][2]int64
	for i, w := range req.Windows {
		if w.Calendar != nil {
			bounds[i][0], bounds[i][1] = w.bounds(at)
			buf = appendCalendarLabel(buf[:prefix], w.Calendar, bounds[i][0])
		} else {
			buf = appendPeriodLabel(buf[:prefix], w.Period)
		}
		cmd = append(cmd, string(buf))
	}
	if ban {
		cmd = append(cmd, req.f.ban.args...)
	}
	cmd = append(cmd, cost)
	for i, w := range req.Windows {
		if w.Calendar != nil {
			cmd = calendarArgs(cmd, w, bounds[i][0], bounds[i][1])
		} else {
			cmd = d.args(cmd, w)
		}
	}
	switch {
	case (d.leases || d.refundsAt) && cost < 0:
		cmd = append(cmd, extra)
	case d.leases:
		// the single-window script is sent want only for a lease
		if want := max(cost, extra); want > cost || !single {
			cmd = append(cmd, want)
		}
		if req.delays() {
			cmd = append(cmd, req.f.delay.Microseconds())
		}
	}
	return s, cmd
}

// runsSingle says a call of req at cost runs its algorithm's single-window
// script: a decision (cost >= 0, no refund) of a rule NewRule chose it for.
func runsSingle(req *Request, cost int64) bool {
	return req.f.single && cost >= 0
}

// eval turns an EVALSHA command of s into the EVAL that loads it, for a
// Redis that no longer has the script (restarted, or SCRIPT FLUSH).
func (s algorithmScript) eval(evalsha []any) []any {
	cmd := append([]any(nil), evalsha...)
	cmd[0], cmd[1] = "eval", s.src
	return cmd
}

// reply is a decoded script reply.
type reply struct {
	allowed bool
	now     time.Time
	results []WindowResult
	// taken is what the decision took from every window: its cost, or a
	// lease's larger amount; 0 when refused.
	taken int64
	// wait is how long an admitted request waits for its reservation
	// (requests with a Delay only).
	wait time.Duration
}

// parseReply decodes {allowed, now_µs, remaining, reset_µs, retry_µs, ...,
// [taken]} of a script deciding cost, appending the windows' results to dst.
// Scripts of algorithms that lease reply taken; for the others it is cost
// when allowed. delays says the call passed a delay: its reply ends with
// wait_µs.
func parseReply(raw any, d *algorithm, windows int, cost int64, delays bool, dst []WindowResult) (reply, error) {
	n := 2 + 3*windows
	if d.leases {
		n++
	}
	if delays {
		n++
	}
	vals, ok := raw.([]any)
	if !ok || len(vals) != n {
		return reply{}, fmt.Errorf("unexpected script reply %v", raw)
	}
	for i, v := range vals {
		if _, ok := v.(int64); !ok {
			return reply{}, fmt.Errorf("unexpected script reply element %d: %v", i, v)
		}
	}
	at := func(i int) int64 { return vals[i].(int64) }
	r := reply{allowed: at(0) == 1, now: time.UnixMicro(at(1)), results: dst}
	for i := range windows {
		j := 2 + 3*i
		r.results = append(r.results, WindowResult{
			Remaining: at(j),
			Reset:     time.UnixMicro(at(j + 1)),
			Retry:     time.Duration(at(j+2)) * time.Microsecond,
		})
	}
	last := n - 1
	if delays {
		r.wait = time.Duration(at(last)) * time.Microsecond
		last--
	}
	switch {
	case d.leases:
		r.taken = at(last)
	case r.allowed:
		r.taken = cost
	}
	if r.wait < 0 || r.wait > 0 && (!r.allowed || r.taken != cost) {
		return reply{}, fmt.Errorf("unexpected script reply: a wait of %s for allowed %v taking %d of cost %d", r.wait, r.allowed, r.taken, cost)
	}
	return r, checkTaken(r, cost)
}

// checkTaken says r took at least cost when allowed, nothing when refused.
func checkTaken(r reply, cost int64) error {
	if r.allowed && r.taken < cost || !r.allowed && r.taken != 0 {
		return fmt.Errorf("unexpected script reply: allowed %v taking %d of cost %d", r.allowed, r.taken, cost)
	}
	return nil
}

// parseSingleReply decodes "allowed now_µs state [taken]", the short
// reply of the single-window script of d, which has singleAnswer, deciding
// cost for window w (taken for the algorithms that lease): the same reply
// parseReply makes of the general script's, the window's result appended
// to dst. A table, which such a script may answer off its hot path (the
// sliding window log's refusals), is read as the general script's.
func parseSingleReply(raw any, d *algorithm, w Window, cost int64, dst []WindowResult) (reply, error) {
	if _, table := raw.([]any); table {
		return parseReply(raw, d, 1, cost, false, dst)
	}
	s, ok := raw.(string)
	if !ok {
		return reply{}, fmt.Errorf("unexpected script reply %v", raw)
	}
	n := 3
	if d.leases {
		n = 4
	}
	var f [4]string
	rest := s
	for i := range n - 1 {
		f[i], rest, _ = strings.Cut(rest, " ")
	}
	f[n-1] = rest
	allowed, err0 := strconv.ParseInt(f[0], 10, 64)
	now, err1 := strconv.ParseInt(f[1], 10, 64)
	var taken int64
	var err3 error
	switch {
	case d.leases:
		taken, err3 = strconv.ParseInt(f[3], 10, 64)
	case allowed == 1:
		taken = cost
	}
	if err := errors.Join(err0, err1, err3); err != nil || allowed != 0 && allowed != 1 {
		return reply{}, fmt.Errorf("unexpected script reply %q", s)
	}
	remaining, reset, retry, err := d.singleAnswer(w, f[2], now, cost, allowed == 1)
	if err != nil {
		return reply{}, fmt.Errorf("unexpected script reply %q: %w", s, err)
	}
	r := reply{allowed: allowed == 1, now: time.UnixMicro(now), taken: taken, results: append(dst, WindowResult{
		Remaining: remaining,
		Reset:     time.UnixMicro(reset),
		Retry:     time.Duration(retry) * time.Microsecond,
	})}
	return r, checkTaken(r, cost)
}
