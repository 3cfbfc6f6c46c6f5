package limiter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// BenchmarkScriptCost measures what Redis spends on each algorithm's
// script, by Redis' own account (INFO commandstats, usec_per_call of
// EVALSHA), beside a minimal twin (testdata/twins) that does the same
// single-window work and nothing else: read TIME and the state, decide,
// write it back with its expiry. Warm calls find their key, cold ones
// create it; 16 callers share one server of their own, so no other test's
// commands are counted. Each run reports redis-µs/call.
//
//	go test ./enforcer/limiter -run '^$' -bench BenchmarkScriptCost -benchtime 20000x
func BenchmarkScriptCost(b *testing.B) {
	srv := redistest.Start(b)
	client := srv.Client()
	for _, a := range config.Algorithms {
		period := time.Minute
		if a == SlidingWindowLog {
			period = time.Second // the log holds a second of calls
		}
		one := []Window{{Requests: 1 << 40, Period: period}}
		three := []Window{{Requests: 1 << 40, Period: period}, {Requests: 1 << 41, Period: time.Hour}, {Requests: 1 << 42, Period: 24 * time.Hour}}
		for _, tc := range []struct {
			name    string
			windows []Window
			cold    bool
		}{{"1w/warm", one, false}, {"1w/cold", one, true}, {"3w/warm", three, false}} {
			b.Run(fmt.Sprintf("%s/script/%s", a, tc.name), func(b *testing.B) {
				measureScript(b, client, func(ctx context.Context, i int64) error {
					req := Request{Algorithm: a, Cost: 1, Windows: tc.windows,
						Bucket: Bucket{Namespace: "bench", Policy: "p", Rule: tc.name, Tenant: HashTenant("salt", benchTenant(tc.cold, i))}}
					s, cmd := evalSHA(&req, 1, 1, 0)
					return runScript(ctx, client, s.src, cmd)
				})
			})
		}
		twin := loadTwin(b, client, a)
		for _, cold := range []bool{false, true} {
			name := "1w/warm"
			if cold {
				name = "1w/cold"
			}
			b.Run(fmt.Sprintf("%s/twin/%s", a, name), func(b *testing.B) {
				measureScript(b, client, func(ctx context.Context, i int64) error {
					key := "twin:" + string(a) + ":" + benchTenant(cold, i)
					return client.EvalSha(ctx, twin, []string{key}, twinArgs(a, one[0])...).Err()
				})
			})
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

// measureScript runs call b.N times from 16 callers after resetting the
// server's statistics, and reports EVALSHA's usec_per_call.
func measureScript(b *testing.B, client *redis.Client, call func(context.Context, int64) error) {
	ctx := context.Background()
	if err := client.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := call(ctx, n.Add(1)); err != nil && !errors.Is(err, redis.Nil) {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	info, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	m := regexp.MustCompile(`cmdstat_evalsha:calls=\d+,usec=\d+,usec_per_call=([0-9.]+)`).FindStringSubmatch(info)
	if m == nil {
		b.Fatalf("no EVALSHA in INFO commandstats:\n%s", info)
	}
	usec, _ := strconv.ParseFloat(m[1], 64)
	b.ReportMetric(usec, "redis-µs/call")
}

// runScript sends an EVALSHA command, loading the script on NOSCRIPT.
func runScript(ctx context.Context, client *redis.Client, src string, cmd []any) error {
	err := client.Do(ctx, cmd...).Err()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err := client.ScriptLoad(ctx, src).Err(); err != nil {
			return err
		}
		err = client.Do(ctx, cmd...).Err()
	}
	return err
}

func loadTwin(b *testing.B, client *redis.Client, a Algorithm) string {
	names := map[Algorithm]string{TokenBucket: "token_bucket", FixedWindow: "fixed_window", GCRA: "gcra",
		SlidingWindowCounter: "sliding_window_counter", SlidingWindowLog: "sliding_window_log"}
	src, err := os.ReadFile(filepath.Join("testdata", "twins", names[a]+".lua"))
	if err != nil {
		b.Fatal(err)
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
