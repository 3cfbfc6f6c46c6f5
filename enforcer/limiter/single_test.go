package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// frozenTime runs ahead of a script under test: its TIME answers the µs
// stored at frozenNowKey, and the expiries it sets are recorded in the hash
// frozenExpiryKey (key -> ms) instead of being set, so that two scripts run
// one after the other see the same clock and their keys outlive a slow
// test. The scripts' own code is unchanged.
const frozenTime = `
local real = redis
local redis = setmetatable({call = function(cmd, ...)
  local args = {...}
  if cmd == 'TIME' then
    local now = tonumber(real.call('GET', 'frozen:now'))
    return {string.format('%d', math.floor(now / 1000000)), string.format('%d', now % 1000000)}
  elseif cmd == 'PEXPIRE' then
    real.call('HSET', 'frozen:expiry', args[1], args[2])
    return 1
  elseif cmd == 'SET' and args[3] == 'PX' then
    real.call('HSET', 'frozen:expiry', args[1], args[4])
    return real.call('SET', args[1], args[2])
  end
  return real.call(cmd, ...)
end}, {__index = real})
`

const (
	frozenNowKey    = "frozen:now"
	frozenExpiryKey = "frozen:expiry"
)

// TestSingleWindowScriptsMatchTheGeneralOnes replays random traffic of a
// one-window rule through its single-window script on one bucket and the
// general script on another, at the same microseconds: every reply, every
// stored state and every expiry set must be identical. Every so often the
// two swap, so each script goes on from the state the other wrote (an
// upgrade where old and new enforcers share keys), and refunds and peeks,
// which the general script serves for both, come in between.
func TestSingleWindowScriptsMatchTheGeneralOnes(t *testing.T) {
	client := redistest.Start(t).Client()
	ctx := context.Background()
	for _, a := range config.Algorithms {
		t.Run(string(a), func(t *testing.T) {
			g := NewWithT(t)
			rng := rand.New(rand.NewPCG(7, uint64(len(a))))
			rule, err := newRule(Bucket{Namespace: "ns", Policy: "p", Rule: "single"}, a,
				[]Window{{Requests: 7, Period: 30 * time.Millisecond, Burst: 9}}, 1, FailurePolicy{})
			g.Expect(err).NotTo(HaveOccurred())
			one, other := rule.Request("one"), rule.Request("other")
			g.Expect(one.f.single).To(BeTrue(), "a one-window rule decides by the single-window script")
			now := time.Now().UnixMicro()
			refused := 0
			for i := range 1500 {
				step := 3 * time.Millisecond
				if rng.IntN(10) == 0 {
					step = 40 * time.Millisecond // past a window or two
				}
				now += rng.Int64N(int64(step / µs))
				g.Expect(client.Set(ctx, frozenNowKey, now, 0).Err()).To(Succeed())
				cost := rng.Int64N(4) // 0 reads
				want := cost
				if rng.IntN(4) == 0 {
					want += rng.Int64N(6) // a lease, for the algorithms that lease
				}
				// each bucket is decided by either script in turn
				one.f.single, other.f.single = i/50%2 == 0, i/50%2 == 1
				switch rng.IntN(10) {
				case 0: // a refund, by the general script on both
					cost = -1 - rng.Int64N(2)
				case 1: // a peek, by the general script on both
					want = -1
				}
				got := frozenCall(t, client, &one, cost, want)
				exp := frozenCall(t, client, &other, cost, want)
				g.Expect(got.reply).To(Equal(exp.reply), "call %d cost %d want %d: reply", i, cost, want)
				g.Expect(got.state).To(Equal(exp.state), "call %d cost %d want %d: stored state", i, cost, want)
				g.Expect(got.expiry).To(Equal(exp.expiry), "call %d cost %d want %d: expiry set", i, cost, want)
				if cost > 0 && want >= 0 && got.reply[0] == 0 {
					refused++
				}
			}
			g.Expect(refused).To(BeNumerically(">", 100), "the traffic reached the limit")
		})
	}
}

// frozenOutcome is what one script call answered and left behind.
type frozenOutcome struct {
	reply  []int64
	state  []string
	expiry string
}

// frozenCall runs the script evalSHA chooses for req at cost (want < 0:
// a peek of cost) on frozen time, and reads back the window's state.
func frozenCall(t *testing.T, client *redis.Client, req *Request, cost, want int64) frozenOutcome {
	t.Helper()
	ctx := context.Background()
	r := *req
	peek := want < 0
	if peek {
		r.f.single, want = false, cost
	}
	extra := want
	if cost < 0 {
		v, err := client.Get(ctx, frozenNowKey).Int64()
		if err != nil {
			t.Fatal(err)
		}
		extra = v // a refund names when its units were counted
	}
	s, cmd := evalSHA(&r, cost, extra, 0)
	if peek {
		cmd = append(cmd, peekArg)
	}
	if want := req.f.single && cost >= 0 && !peek; want != (s.sha == descriptorOf(req.Algorithm).single.sha) {
		t.Fatalf("evalSHA chose %s for single %v cost %d peek %v", s.sha, req.f.single, cost, peek)
	}
	key := cmd[3].(string)
	if err := client.Del(ctx, frozenExpiryKey).Err(); err != nil {
		t.Fatal(err)
	}
	eval := append([]any{"eval", frozenTime + s.src}, cmd[2:]...)
	raw, err := client.Do(ctx, eval...).Result()
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	var out frozenOutcome
	switch v := raw.(type) {
	case int64:
		out.reply = []int64{v}
	case []any:
		for _, e := range v {
			out.reply = append(out.reply, e.(int64))
		}
	case string: // a single-window script's short reply, as the enforcer reads it
		out.reply = replyTable(t, v, req, cost)
	default:
		t.Fatalf("unexpected reply %v", raw)
	}
	out.state = frozenState(t, client, key)
	out.expiry, err = client.HGet(ctx, frozenExpiryKey, key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return out
}

// frozenState is the window's state at key, whatever its type.
func frozenState(t *testing.T, client *redis.Client, key string) []string {
	t.Helper()
	ctx := context.Background()
	typ, err := client.Type(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	state := []string{typ}
	switch typ {
	case "hash":
		m, err := client.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"w", "c", "p", "t", "ts"} {
			if v, ok := m[f]; ok {
				state = append(state, f+"="+v)
			}
		}
		if len(state) != len(m)+1 {
			t.Fatalf("unexpected fields in %s: %v", key, m)
		}
	case "string":
		v, err := client.Get(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		state = append(state, v)
	case "zset":
		zs, err := client.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range zs {
			state = append(state, fmt.Sprint(z.Member)+"@"+strconv.FormatFloat(z.Score, 'f', -1, 64))
		}
	}
	return state
}

// replyTable is raw, the short reply of req's single-window script deciding
// cost, in the general script's shape: {allowed, now_µs, remaining,
// reset_µs, retry_µs[, taken]}, as parseSingleReply reads it.
func replyTable(t *testing.T, raw any, req *Request, cost int64) []int64 {
	t.Helper()
	r, err := parseSingleReply(raw, descriptorOf(req.Algorithm), req.Windows[0], cost, nil)
	if err != nil {
		t.Fatal(err)
	}
	allowed := int64(0)
	if r.allowed {
		allowed = 1
	}
	w := r.results[0]
	table := []int64{allowed, r.now.UnixMicro(), w.Remaining, w.Reset.UnixMicro(), w.Retry.Microseconds()}
	if descriptorOf(req.Algorithm).leases {
		table = append(table, r.taken)
	}
	return table
}
