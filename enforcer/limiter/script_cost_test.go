package limiter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// BenchmarkScriptCost measures what Redis spends on each algorithm's
// script, by Redis' own account (INFO commandstats, usec of EVALSHA per
// call), side by side in one run: the script a rule of that shape runs
// (for one window, the algorithm's single-window script), the general
// script it ran before, and a minimal twin (testdata/twins) that does the
// same single-window work and nothing else: read TIME and the state,
// decide, write it back with its expiry, answer 1; and that twin answering
// a reply of the single-window script's shape, the least a script that
// replies so can cost. The four take turns in blocks of blockCalls, in an
// order that rotates, so that what else runs on the machine weighs on each
// alike;
// each block is 16 callers' pipelines of 16 calls, which keeps the server
// busy and its figures steady. Warm calls find their key, cold ones create
// it; the server is the benchmark's own. Each run reports the median over
// rounds of µs per call of each and of the script's ratio to its twin.
//
//	go test ./enforcer/limiter -run '^$' -bench BenchmarkScriptCost -benchtime 20000x -count 3
func BenchmarkScriptCost(b *testing.B) {
	srv := redistest.Start(b)
	client := srv.Client()
	ctx := context.Background()
	loadScripts(b, client)
	for _, a := range config.Algorithms {
		period := time.Minute
		if a == SlidingWindowLog {
			period = time.Second // the log holds a second of calls
		}
		one := []Window{{Requests: 1 << 40, Period: period}}
		three := []Window{{Requests: 1 << 40, Period: period}, {Requests: 1 << 41, Period: time.Hour}, {Requests: 1 << 42, Period: 24 * time.Hour}}
		twin, replied := loadTwin(b, client, a, false), loadTwin(b, client, a, true)
		for _, tc := range []struct {
			name    string
			windows []Window
			cold    bool
		}{{"1w/warm", one, false}, {"1w/cold", one, true}, {"3w/warm", three, false}} {
			b.Run(fmt.Sprintf("%s/%s", a, tc.name), func(b *testing.B) {
				rule, err := newRule(Bucket{Namespace: "bench", Policy: "p", Rule: strings.ReplaceAll(tc.name, "/", "-")}, a, tc.windows, 1, FailurePolicy{}, withLeasing(config.LeasingOff))
				if err != nil {
					b.Fatal(err)
				}
				var n atomic.Int64
				script := func(single bool) func() []any {
					return func() []any {
						req := rule.Request(HashTenant("salt", benchTenant(tc.cold, n.Add(1))))
						req.f.single = req.f.single && single
						_, cmd := evalSHA(&req, 1, 1, 0)
						return cmd
					}
				}
				twinCall := func(sha string) func() []any {
					return func() []any {
						key := "twin:" + sha[:8] + ":" + benchTenant(tc.cold, n.Add(1))
						return append([]any{"evalsha", sha, 1, key}, twinArgs(a, one[0])...)
					}
				}
				variants := []costVariant{{name: "script", call: script(true)}}
				if len(tc.windows) == 1 {
					variants = append(variants, costVariant{name: "general", call: script(false)},
						costVariant{name: "twin", call: twinCall(twin)}, costVariant{name: "twin+reply", call: twinCall(replied)})
				}
				twin := 0
				if len(variants) > 1 {
					twin = 2
				}
				reportMedians(b, variants, measureScripts(ctx, b, client, variants, nil), twin)
			})
		}
	}
}

// BenchmarkSlidingWindowLogEntries measures what the sliding window log's
// single-window script costs with n entries in the log, beside its twin on
// a log of as many: admitted calls, each adding one entry (the log is cut
// back to n between blocks), and refused calls, each reading the entry
// that must leave before the request fits and the newest.
//
//	go test ./enforcer/limiter -run '^$' -bench BenchmarkSlidingWindowLogEntries -benchtime 5000x -count 3
func BenchmarkSlidingWindowLogEntries(b *testing.B) {
	srv := redistest.Start(b)
	client := srv.Client()
	ctx := context.Background()
	loadScripts(b, client)
	twin := loadTwin(b, client, SlidingWindowLog, false)
	for _, entries := range []int64{10, 100, 1000, 10000, 100000} {
		b.Run(fmt.Sprintf("entries=%d", entries), func(b *testing.B) {
			bucket := Bucket{Namespace: "bench", Policy: "p", Rule: fmt.Sprint("log", entries)}
			admit, err := newRule(bucket, SlidingWindowLog, []Window{{Requests: 1 << 40, Period: time.Hour}}, 1, FailurePolicy{})
			if err != nil {
				b.Fatal(err)
			}
			refuse, err := newRule(bucket, SlidingWindowLog, []Window{{Requests: entries, Period: time.Hour}}, 1, FailurePolicy{})
			if err != nil {
				b.Fatal(err)
			}
			admitted, refused := admit.Request("admitted"), refuse.Request("refused")
			twinKey := fmt.Sprint("twin:log:", entries)
			keys := []string{bucket.withTenant(admitted.Bucket.Tenant).Key(SlidingWindowLog, time.Hour),
				bucket.withTenant(refused.Bucket.Tenant).Key(SlidingWindowLog, time.Hour), twinKey}
			fillLog(ctx, b, client, keys, entries)
			call := func(req *Request) func() []any {
				return func() []any {
					_, cmd := evalSHA(req, 1, 1, 0)
					return cmd
				}
			}
			variants := []costVariant{{name: "admitted", call: call(&admitted)}, {name: "refused", call: call(&refused)},
				{name: "twin", call: func() []any {
					return append([]any{"evalsha", twin, 1, twinKey}, twinArgs(SlidingWindowLog, Window{Requests: 1 << 40, Period: time.Hour})...)
				}}}
			rounds := measureScripts(ctx, b, client, variants, func() {
				for _, k := range keys {
					if err := client.ZRemRangeByRank(ctx, k, entries, -1).Err(); err != nil {
						b.Fatal(err)
					}
				}
			})
			reportMedians(b, variants, rounds, 2)
		})
	}
}

// withTenant is b for tenant.
func (b Bucket) withTenant(tenant Tenant) Bucket {
	b.Tenant = tenant
	return b
}

// fillLog gives each sorted set of keys n entries over the last half hour,
// named as the script names its own.
func fillLog(ctx context.Context, b *testing.B, client *redis.Client, keys []string, n int64) {
	now := time.Now().UnixMicro()
	for _, k := range keys {
		_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, k)
			for i := range n {
				at := now - int64(30*time.Minute/time.Microsecond) + i*int64(30*time.Minute/time.Microsecond)/n
				p.ZAdd(ctx, k, redis.Z{Score: float64(at), Member: fmt.Sprint(at, "-1")})
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// benchTenant is the same tenant for warm calls, a new one for each cold one.
func benchTenant(cold bool, i int64) string {
	if !cold {
		return "warm"
	}
	return "cold-" + strconv.FormatInt(i, 10)
}

// costVariant is one script whose cost is measured: call builds the
// EVALSHA command of its next call.
type costVariant struct {
	name string
	call func() []any
}

const (
	costCallers = 16
	costBatch   = 16
	blockCalls  = costCallers * costBatch
)

// measureScripts runs each variant b.N times (at least one block), the
// variants taking turns in blocks of blockCalls, in an order that rotates
// from round to round (whichever runs first in a round was measured
// dearer than the same script later in it), with between blocks,
// when set. It returns each one's EVALSHA usec per call in every round
// (one block of each), from the changes of INFO commandstats around its
// blocks.
func measureScripts(ctx context.Context, b *testing.B, client *redis.Client, variants []costVariant, between func()) [][]float64 {
	var rounds [][]float64
	b.ResetTimer()
	for done := 0; done < b.N; done += blockCalls {
		round := make([]float64, len(variants))
		// the order moves by one each round: no variant always runs first
		for j := range variants {
			i := (j + len(rounds)) % len(variants)
			v := variants[i]
			u0, c0 := evalshaStats(ctx, b, client)
			runBlock(ctx, b, client, v.call)
			u1, c1 := evalshaStats(ctx, b, client)
			round[i] = float64(u1-u0) / float64(c1-c0)
			if between != nil {
				between()
			}
		}
		rounds = append(rounds, round)
	}
	b.StopTimer()
	return rounds
}

// reportMedians reports each variant's median µs per call over the rounds
// and, when twin is a variant's index, the median of the first variant's
// ratio to it within a round: a burst of other work on the machine
// weighs on a few rounds, not on the medians.
func reportMedians(b *testing.B, variants []costVariant, rounds [][]float64, twin int) {
	median := func(f func(round []float64) float64) float64 {
		vs := make([]float64, len(rounds))
		for i, r := range rounds {
			vs[i] = f(r)
		}
		slices.Sort(vs)
		return vs[len(vs)/2]
	}
	for i, v := range variants {
		b.ReportMetric(median(func(r []float64) float64 { return r[i] }), v.name+"-µs/call")
	}
	if twin > 0 {
		b.ReportMetric(median(func(r []float64) float64 { return r[0] / r[twin] }), "script/twin")
	}
}

// runBlock sends blockCalls calls from costCallers pipelines at once.
func runBlock(ctx context.Context, b *testing.B, client *redis.Client, call func() []any) {
	var wg sync.WaitGroup
	for range costCallers {
		cmds := make([][]any, costBatch)
		for i := range cmds {
			cmds[i] = call()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, c := range cmds {
					p.Do(ctx, c...)
				}
				return nil
			})
			if err != nil && !errors.Is(err, redis.Nil) {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
}

var evalshaStatsLine = regexp.MustCompile(`cmdstat_evalsha:calls=(\d+),usec=(\d+),`)

// evalshaStats are EVALSHA's total usec and calls so far.
func evalshaStats(ctx context.Context, b *testing.B, client *redis.Client) (usec, calls int64) {
	info, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	m := evalshaStatsLine.FindStringSubmatch(info)
	if m == nil {
		return 0, 0
	}
	calls, _ = strconv.ParseInt(m[1], 10, 64)
	usec, _ = strconv.ParseInt(m[2], 10, 64)
	return usec, calls
}

// loadScripts loads every algorithm's scripts into the server.
func loadScripts(b *testing.B, client *redis.Client) {
	for _, d := range algorithms {
		for _, s := range []algorithmScript{d.script, d.single} {
			if err := client.ScriptLoad(context.Background(), s.src).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// loadTwin loads a's twin and, when replied is set, the twin answering
// with a reply of the shape of a's single-window script's (its last
// "return 1" made a table of as many integers, or the string of as many
// numbers), and returns its sha.
func loadTwin(b *testing.B, client *redis.Client, a Algorithm, replied bool) string {
	names := map[Algorithm]string{TokenBucket: "token_bucket", FixedWindow: "fixed_window", GCRA: "gcra",
		SlidingWindowCounter: "sliding_window_counter", SlidingWindowLog: "sliding_window_log"}
	src, err := os.ReadFile(filepath.Join("testdata", "twins", names[a]+".lua"))
	if err != nil {
		b.Fatal(err)
	}
	if replied {
		last := strings.LastIndex(string(src), "return 1")
		reply := map[Algorithm]string{ // in the twin's own variables
			TokenBucket:      "return string.format('1 %d %.17g %d', now, tok, 1)",
			GCRA:             "return string.format('1 %d %d %d', now, new, 1)",
			SlidingWindowLog: "return string.format('1 %d %d', now, 0)",
		}[a]
		if reply == "" {
			reply = "return {1, now, 0, now, 0}"
		}
		src = []byte(string(src[:last]) + reply + string(src[last+len("return 1"):]))
	}
	sha, err := client.ScriptLoad(context.Background(), string(src)).Result()
	if err != nil {
		b.Fatal(err)
	}
	return sha
}

// twinArgs are a twin's arguments for window w, as its script reads them.
func twinArgs(a Algorithm, w Window) []any {
	switch a {
	case TokenBucket:
		return []any{w.Requests, w.Period.Milliseconds(), w.capacity(a)}
	case GCRA:
		interval, tolerance := gcraSpacing(w.Requests, w.Period.Microseconds(), w.capacity(a))
		return []any{interval, tolerance}
	}
	return []any{w.Requests, w.Period.Milliseconds()}
}
