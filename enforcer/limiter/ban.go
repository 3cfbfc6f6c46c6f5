package limiter

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// Ban is a rule's ban (config.Ban) as the limiter applies it: Denials
// refusals within Within start a ban of Durations[level-1] (the last one
// repeats), and a ban starting within ForgetAfter of the end of the
// previous one is one level higher.
//
// The ban lives in Redis next to the bucket (ban.lua wraps the algorithm's
// script), so it is decided in the same atomic call as the limit, on every
// replica alike, and survives restarts. A Guard remembers the bans it
// learns of and refuses locally until they end (ban_guard.go).
type Ban struct {
	*config.Ban
	// args is the ban's part of the script's ARGV, boxed once.
	args []any
}

// banOf is the limiter's form of b, nil when b is.
func banOf(b *config.Ban) *Ban {
	if b == nil {
		return nil
	}
	out := &Ban{Ban: b}
	out.args = append(out.args, b.Denials, b.Within.Milliseconds(), b.ForgetAfter.Milliseconds(), len(b.Durations))
	for _, d := range b.Durations {
		out.args = append(out.args, d.Milliseconds())
	}
	return out
}

// Longest is the longest of the ban's durations.
func (b *Ban) Longest() time.Duration {
	var m time.Duration
	for _, d := range b.Durations {
		m = max(m, d.Duration)
	}
	return m
}

func (b *Ban) validate() error {
	if b.Denials < 1 {
		return fmt.Errorf("%w: ban: denials must be at least 1, got %d", ErrInvalidRequest, b.Denials)
	}
	if len(b.Durations) == 0 || len(b.Durations) > 8 {
		return fmt.Errorf("%w: ban: 1 to 8 durations, got %d", ErrInvalidRequest, len(b.Durations))
	}
	for _, d := range append([]config.Duration{b.Within, b.ForgetAfter}, b.Durations...) {
		if d.Duration < time.Millisecond || d.Duration%time.Millisecond != 0 {
			return fmt.Errorf("%w: ban: durations must be whole milliseconds, at least 1ms, got %s", ErrInvalidRequest, d.Duration)
		}
	}
	return nil
}

// BanState is what a decision says of its tenant's ban under the rule.
type BanState struct {
	// Until is when the ban ends; zero when the tenant is not banned.
	Until time.Time
	// Level is the ban's escalation level, 1 for a first ban.
	Level int64
	// Denials and Within are the refusals that started it.
	Denials int64
	Within  time.Duration
	// Started is set on the decision whose refusal started the ban.
	Started bool
}

// Active reports whether the decision is a ban's.
func (s BanState) Active() bool { return !s.Until.IsZero() }

// banScripts are the algorithms' scripts wrapped by ban.lua.
var banScripts = func() map[Algorithm]algorithmScript {
	wrapper, _ := mustScript("ban.lua")
	m := make(map[Algorithm]algorithmScript, len(allAlgorithms))
	for _, d := range allAlgorithms {
		src := strings.Replace(wrapper, "--ALGORITHM--\n", d.script.src, 1)
		m[d.name] = scriptOf(src)
	}
	return m
}()

// appendBanKeys appends the keys of b's ban hash and refusal log, under the
// bucket's hash tag: sl:{<namespace>/<policy>/<rule>/<tenant>}:ban and
// ...:bandenials.
func (b Bucket) appendBanKey(dst []byte, suffix string) []byte {
	dst = append(dst, "sl:{"...)
	dst = append(dst, b.String()...)
	dst = append(dst, "}:"...)
	return append(dst, suffix...)
}

// banIndexKey is the sorted set of a rule's banned tenants, scored by when
// their ban ends (ms, Redis' clock): sl:{<namespace>/<policy>/<rule>}:bans.
// It has a hash tag of its own (one per rule, not per tenant), so it is
// written in a call of its own when a ban starts.
func (b Bucket) banIndexKey() string {
	return "sl:{" + b.Namespace + "/" + b.Policy + "/" + b.Rule + "}:bans"
}

// parseBanReply decodes the reply of ban.lua: a banned tenant's, or the
// algorithm's reply with the ban it started, if any.
func parseBanReply(raw any, req *Request, cost int64, dst []WindowResult) (reply, BanState, error) {
	vals, ok := raw.([]any)
	if !ok || len(vals) < 3 {
		return reply{}, BanState{}, fmt.Errorf("unexpected script reply %v", raw)
	}
	ints := make([]int64, 0, 5)
	for _, v := range vals[len(vals)-3:] {
		i, ok := v.(int64)
		if !ok {
			return reply{}, BanState{}, fmt.Errorf("unexpected script reply %v", raw)
		}
		ints = append(ints, i)
	}
	if first, _ := vals[0].(int64); first == 2 {
		if len(vals) != 5 {
			return reply{}, BanState{}, fmt.Errorf("unexpected banned reply %v", raw)
		}
		now, _ := vals[1].(int64)
		ban := BanState{Until: time.UnixMicro(ints[0]), Level: ints[1], Denials: ints[2], Within: req.f.ban.Within.Duration}
		r := reply{now: time.UnixMicro(now), results: dst}
		for range req.Windows {
			r.results = append(r.results, WindowResult{Reset: ban.Until, Retry: ban.Until.Sub(r.now)})
		}
		return r, ban, nil
	}
	r, err := parseReply(vals[:len(vals)-3], descriptorOf(req.Algorithm), len(req.Windows), cost, req.delays(), dst)
	if err != nil || ints[0] == 0 {
		return r, BanState{}, err
	}
	return r, BanState{Until: time.UnixMicro(ints[0]), Level: ints[1], Denials: ints[2], Within: req.f.ban.Within.Duration, Started: true}, nil
}

// applyBan makes d the answer of ban: refused until it ends.
func applyBan(d *Decision, ban BanState) {
	d.Ban = ban
	d.Allowed = false
	d.Remaining = 0
	if wait := ban.Until.Sub(d.Now); wait > d.RetryAfter {
		d.RetryAfter = wait
	}
	if ban.Until.After(d.Reset) {
		d.Reset = ban.Until
	}
}

// scriptOf is the script with source src.
func scriptOf(src string) algorithmScript {
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	return algorithmScript{src: src, sha: sha, shaArg: sha}
}
