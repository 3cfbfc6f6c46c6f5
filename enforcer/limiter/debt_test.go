package limiter

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// TestLocalMatchesRedisScriptsInDebt is TestLocalMatchesRedisScripts with
// debts: every so often an answer's charge (charge.lua) takes the bucket
// below empty in Redis, and Local is given the state Redis then holds.
// From there the replies must stay identical, remaining below zero
// included, for the general script (two windows) and the single-window one.
func TestLocalMatchesRedisScriptsInDebt(t *testing.T) {
	client := redistest.Start(t).Client()
	two := []Window{{Requests: 7, Period: 30 * time.Millisecond, Burst: 9}, {Requests: 13, Period: 110 * time.Millisecond}}
	for _, tc := range []struct {
		name    string
		windows []Window
	}{{"general", two}, {"single", two[:1]}} {
		for _, a := range []Algorithm{FixedWindow, SlidingWindowCounter, TokenBucket, GCRA} {
			t.Run(tc.name+"/"+string(a), func(t *testing.T) { testLocalMatchesRedisScriptInDebt(t, client, a, tc.windows) })
		}
	}
}

func testLocalMatchesRedisScriptInDebt(t *testing.T, client *redis.Client, a Algorithm, windows []Window) {
	g := NewWithT(t)
	rng := rand.New(rand.NewPCG(5, uint64(len(a))))
	clock := &localClock{}
	l := NewLocal(clock.now)
	req := Request{Algorithm: a, Windows: windows,
		Bucket: localBucket(fmt.Sprint(t.Name(), time.Now().UnixNano()))}
	inDebt := 0
	for i := range 800 {
		if rng.IntN(25) == 0 {
			chargeInRedis(t, client, &req, 5+rng.Int64N(20))
			copyRedisState(t, client, l, &req)
		}
		req.Cost = rng.Int64N(4) // 0 reads
		want := runLocalScript(t, client, &req)
		clock.set(time.UnixMicro(want[1]).Sub(localEpoch))
		allowed, now, results := l.Check(&req)
		got := []int64{0, now.UnixMicro()}
		if allowed {
			got[0] = 1
		}
		for _, r := range results {
			got = append(got, r.Remaining, r.Reset.UnixMicro(), r.Retry.Microseconds())
		}
		g.Expect(got).To(Equal(want), "call %d cost %d: {allowed, now, then remaining, reset, retry per window}", i, req.Cost)
		debts := req
		debts.f.debts = true
		if d := decide(&debts, allowed, now, results); d.Debt > 0 {
			inDebt++
			g.Expect(d.Allowed).To(BeFalse(), "call %d: a request of a tenant in debt is refused", i)
			g.Expect(d.Remaining).To(BeZero())
			g.Expect(d.Debt).To(Equal(-results[d.Window].Remaining))
		}
		if rng.IntN(8) == 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(15 * time.Millisecond))))
		}
	}
	g.Expect(inDebt).To(BeNumerically(">", 20), "the charges took the tenant into debt")
}

// chargeInRedis charges units to every window of req's bucket, as an
// answer reporting more than the request's cost does.
func chargeInRedis(t *testing.T, client *redis.Client, req *Request, units int64) {
	t.Helper()
	if err := client.Do(context.Background(), chargeScript.eval(chargeCmd(req, units, 0))...).Err(); err != nil {
		t.Fatal(err)
	}
}

// copyRedisState gives l, for each window of req's bucket, the state its
// Redis key holds. Its expiry is left far: once the key would expire, the
// state reads as a fresh one's in either.
func copyRedisState(t *testing.T, client *redis.Client, l *Local, req *Request) {
	t.Helper()
	ctx := context.Background()
	alg := descriptorOf(req.Algorithm)
	sh := l.m.shardAt(maphash.Comparable(l.m.seed, req.Bucket))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, w := range req.Windows {
		redisKey := req.Bucket.Key(req.Algorithm, w.Period)
		var v []any
		switch req.Algorithm {
		case GCRA:
			v = []any{nil}
			if last, err := client.Get(ctx, redisKey).Result(); err == nil {
				v[0] = last
			}
		case TokenBucket:
			v = client.HMGet(ctx, redisKey, "t", "ts").Val()
		default: // FixedWindow, SlidingWindowCounter
			v = client.HMGet(ctx, redisKey, "w", "c", "p").Val()
		}
		if v[0] == nil {
			// Expired on a slow machine: Redis reads it as fresh, and so
			// does Local, whose entry is as old.
			continue
		}
		key := localKey{req.Bucket, w.windowID(), alg}
		e := sh.m[key]
		if e == nil {
			e = l.create(sh, key, 0)
		}
		*e = localEntry{expires: math.MaxInt64}
		sh.x.minExpiry = min(sh.x.minExpiry, e.expires)
		switch req.Algorithm {
		case GCRA:
			e.last = mustInt(t, v[0].(string))
		case TokenBucket:
			tokens, err := strconv.ParseFloat(v[0].(string), 64)
			if err != nil {
				t.Fatal(err)
			}
			e.tokens, e.last = tokens, mustInt(t, v[1].(string))
		default:
			e.win, e.cur = mustInt(t, v[0].(string)), mustInt(t, v[1].(string))
			if p, ok := v[2].(string); ok {
				e.prev = mustInt(t, p)
			}
		}
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOnlyAnswersChargedMakeADebt: a lowered limit leaves more counted than
// it allows, which is no debt; a charge of the rule's answers is one.
func TestOnlyAnswersChargedMakeADebt(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	guard := NewGuard(newRedis(t, standalone.URL()))
	tenant := HashTenant("salt", fmt.Sprint(t.Name(), time.Now().UnixNano()))
	var buf [1]Admission
	decideAt := func(rule Rule) Decision {
		o := guard.Decide(ctx, []Request{rule.Request(tenant)}, buf[:0])[0]
		g.Expect(o.Err).NotTo(HaveOccurred())
		return o.Decision
	}
	window := func(requests int64) []Window { return []Window{{Requests: requests, Period: time.Hour}} }
	off := withLeasing(config.LeasingOff)

	high, err := newRule(bucketFor(t), FixedWindow, window(10), 1, FailurePolicy{}, off)
	g.Expect(err).NotTo(HaveOccurred())
	for range 8 {
		g.Expect(decideAt(high).Allowed).To(BeTrue())
	}
	lowered, err := newRule(bucketFor(t), FixedWindow, window(5), 1, FailurePolicy{}, off)
	g.Expect(err).NotTo(HaveOccurred())
	d := decideAt(lowered)
	g.Expect([]any{d.Allowed, d.Remaining, d.Debt}).To(Equal([]any{false, int64(0), int64(0)}),
		"8 counted of a limit lowered to 5: refused, no debt")

	charged := responseRule(t, FixedWindow) // 10 per hour, the same bucket
	req := charged.Request(tenant)
	_, err = guard.charge(ctx, []Request{req}, []int64{7}, []time.Time{time.Now()})
	g.Expect(err).NotTo(HaveOccurred())
	d = decideAt(charged)
	g.Expect([]any{d.Allowed, d.Remaining, d.Debt}).To(Equal([]any{false, int64(0), int64(5)}),
		"15 counted of 10 by the answers' charge: a debt of 5")
}

// TestDebtReadMatchesTheDecision: at the same microsecond, the debt that
// charge.lua answers a charge with (Guard.Charge) is, window by window, the
// deciding script's remaining below zero (what the headers and
// /debug/tenant show), for the
// general script (two windows) and the single-window one, through random
// charges, decisions and time.
func TestDebtReadMatchesTheDecision(t *testing.T) {
	client := redistest.Start(t).Client()
	ctx := context.Background()
	two := []Window{{Requests: 7, Period: 30 * time.Millisecond, Burst: 9}, {Requests: 13, Period: 110 * time.Millisecond}}
	for _, windows := range [][]Window{two, two[:1]} {
		for _, a := range []Algorithm{FixedWindow, SlidingWindowCounter, TokenBucket, GCRA} {
			t.Run(fmt.Sprintf("%dw/%s", len(windows), a), func(t *testing.T) {
				g := NewWithT(t)
				rng := rand.New(rand.NewPCG(11, uint64(len(a))))
				rule, err := newRule(Bucket{Namespace: "ns", Policy: "p", Rule: fmt.Sprintf("debt%d", len(windows))}, a, windows, 1, FailurePolicy{},
					func(cr *config.Rule) { cr.ResponseCost = &config.ResponseCost{Header: "X-Cost"} })
				g.Expect(err).NotTo(HaveOccurred())
				req := rule.Request(HashTenant("salt", fmt.Sprint(t.Name(), time.Now().UnixNano())))
				now := time.Now().UnixMicro()
				inDebt := 0
				for i := range 600 {
					now += rng.Int64N(int64(8 * time.Millisecond / µs))
					g.Expect(client.Set(ctx, frozenNowKey, now, 0).Err()).To(Succeed())
					if rng.IntN(6) == 0 {
						frozenCharge(t, client, &req, 1+rng.Int64N(15))
					}
					read := frozenCharge(t, client, &req, 0)
					cost := rng.Int64N(3) // 0 reads
					reply := frozenCall(t, client, &req, cost, cost).reply
					for w := range windows {
						remaining := reply[2+3*w]
						g.Expect(read[w]).To(Equal(max(-remaining, 0)), "call %d window %d: debt read, remaining %d", i, w, remaining)
						if read[w] > 0 {
							inDebt++
						}
					}
				}
				g.Expect(inDebt).To(BeNumerically(">", 50), "the charges took the tenant into debt")
			})
		}
	}
}

// frozenCharge runs charge.lua on frozen time for units of req's windows
// (0 reads) and returns each window's debt.
func frozenCharge(t *testing.T, client *redis.Client, req *Request, units int64) []int64 {
	t.Helper()
	cmd := chargeCmd(req, units, 0)
	raw, err := client.Do(context.Background(), append([]any{"eval", frozenTime + chargeScript.src}, cmd[2:]...)...).Slice()
	if err != nil {
		t.Fatal(err)
	}
	debt := make([]int64, 0, len(raw)-1)
	for _, v := range raw[1:] {
		debt = append(debt, v.(int64))
	}
	return debt
}
