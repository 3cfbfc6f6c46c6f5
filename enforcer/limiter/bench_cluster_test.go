package limiter

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// BenchmarkColdTenants measures decisions of 10,000 tenants in turn, each
// one script call (leasing Off), by 64 callers through a Guard, against
// the package's single Redis and its 3-shard Cluster side by side. Beside
// the rate, which on a small machine the load and the shards share, it
// reports what the Redis side spent, summed over the shards (INFO
// commandstats and stats): µs of script per decision, script calls per
// decision, and decisions per read (how many decisions one pipelined
// round trip carried to a shard). docs/performance-redis.md records the figures.
func BenchmarkColdTenants(b *testing.B) {
	for _, topo := range []struct {
		name  string
		url   string
		nodes func() []*redistest.Server
	}{
		{"single", standalone.URL(), func() []*redistest.Server { return []*redistest.Server{standalone} }},
		{"cluster3", cluster.URL(), cluster.Nodes},
	} {
		for _, tenants := range []int{10_000, 1_000} {
			b.Run(fmt.Sprintf("%s/tenants%d", topo.name, tenants), func(b *testing.B) {
				benchColdTenants(b, topo.url, topo.nodes(), tenants, 64, nil)
			})
		}
	}
}

// shardCPU is the share of one CPU each Redis gets in
// BenchmarkShardCapacity: little enough that the servers, not the callers
// sharing a small machine, bound the rate.
const shardCPU = 0.05

// shardCallers is how many decisions BenchmarkShardCapacity keeps in flight:
// enough that while one shard is throttled the others still have work.
const shardCallers = 256

// BenchmarkShardCapacity shows what Redis Cluster's shards add: each
// redis-server is capped at the same share of a CPU (a cgroup of its own;
// root only, skipped otherwise), so that Redis is the bottleneck, and the
// same cold decisions as BenchmarkColdTenants (10,000 tenants, 64 callers,
// one script call each) go to a single Redis, a 1-shard Cluster and a
// 3-shard Cluster, each started for the benchmark. The rate of the 3-shard
// Cluster over the 1-shard one is what a shard adds.
func BenchmarkShardCapacity(b *testing.B) {
	single := redistest.Start(b)
	one := redistest.StartCluster(b, 1)
	three := redistest.StartCluster(b, 3)
	for _, s := range append(append([]*redistest.Server{single}, one.Nodes()...), three.Nodes()...) {
		if err := s.LimitCPU(shardCPU); err != nil {
			b.Skip(err)
		}
	}
	for _, topo := range []struct {
		name  string
		url   string
		nodes []*redistest.Server
	}{
		{"single", single.URL(), []*redistest.Server{single}},
		{"cluster1", one.URL(), one.Nodes()},
		{"cluster3", three.URL(), three.Nodes()},
	} {
		b.Run(topo.name, func(b *testing.B) {
			benchColdTenants(b, topo.url, topo.nodes, 10_000, shardCallers, nil)
		})
	}
}

// BenchmarkFlushDelay compares the autopipeliner's default (a batch goes
// out as soon as the one before it is answered) with a coalescing wait,
// at 1 and 64 callers and 1,000 tenants on the single Redis.
func BenchmarkFlushDelay(b *testing.B) {
	for _, callers := range []int{1, 64} {
		for _, delay := range []time.Duration{0, 20 * time.Microsecond, 100 * time.Microsecond} {
			b.Run(fmt.Sprintf("c%d/%s", callers, delay), func(b *testing.B) {
				cfg := redis.DefaultAutoPipelineOptions()
				cfg.MaxFlushDelay = delay
				benchColdTenants(b, standalone.URL(), []*redistest.Server{standalone}, 1_000, callers, cfg)
			})
		}
	}
}

func benchColdTenants(b *testing.B, url string, nodes []*redistest.Server, tenants, callers int, pipeline *redis.AutoPipelineOptions) {
	client, err := NewClient(url, ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	if pipeline != nil {
		// the client keeps its first autopipeliner: NewRedis gets this one
		if _, err := client.AsyncAutoPipelineWithOptions(pipeline); err != nil {
			b.Fatal(err)
		}
	}
	r, err := NewRedis(client)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	g := NewGuard(r)
	defer g.Close()
	policy := fmt.Sprintf("p%d", time.Now().UnixNano())
	rule, err := newRule(Bucket{Namespace: "bench", Policy: policy, Rule: "r"}, FixedWindow,
		[]Window{{Requests: 1 << 40, Period: time.Hour}}, 1, FailurePolicy{Mode: config.FailClosed, Timeout: time.Second}, withLeasing(config.LeasingOff))
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]Request, tenants)
	for i := range reqs {
		reqs[i] = rule.Request(HashTenant("salt", policy+strconv.Itoa(i)))
	}
	ctx := context.Background()
	for i := range reqs[:min(len(reqs), 100)] { // the script loaded everywhere
		g.Decide(ctx, reqs[i:i+1], nil)
	}
	var next atomic.Int64
	before := redisSide(b, nodes)
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	if callers == 1 {
		// one caller: RunParallel would start one per thread
		b.ResetTimer()
		start := time.Now()
		var out []Admission
		for i := range b.N {
			out = g.Decide(ctx, reqs[i%len(reqs):i%len(reqs)+1], out)
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
		return
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var out []Admission
		for pb.Next() {
			req := reqs[int(next.Add(1))%len(reqs)]
			out = g.Decide(ctx, []Request{req}, out)
			if out[0].Err != nil || !out[0].Decision.Allowed {
				b.Errorf("%+v", out[0])
				return
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	after := redisSide(b, nodes)
	n := float64(b.N)
	b.ReportMetric(n/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(after.usec-before.usec)/n, "redis-µs/decision")
	b.ReportMetric(float64((after.cpu-before.cpu).Microseconds())/n, "redis-cpu-µs/decision")
	b.ReportMetric(float64(after.calls-before.calls)/n, "redis-calls/decision")
	if reads := after.reads - before.reads; reads > 0 {
		b.ReportMetric(float64(after.calls-before.calls)/float64(reads), "decisions/read")
	}
}

// redisLoad is what Redis servers did, summed: script calls and their µs
// (EVALSHA and EVAL), and reads from client sockets.
// cpu is the servers' CPU time as the scheduler counts it.
type redisLoad struct {
	calls, usec, reads int64
	cpu                time.Duration
}

func redisSide(b *testing.B, nodes []*redistest.Server) redisLoad {
	var l redisLoad
	for _, n := range nodes {
		cpu, err := n.CPUTime()
		if err != nil {
			b.Fatal(err)
		}
		l.cpu += cpu
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		info, err := rdb.Info(context.Background(), "commandstats", "stats").Result()
		_ = rdb.Close()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			line = strings.TrimSpace(line)
			if name, rest, ok := strings.Cut(line, ":"); ok {
				switch name {
				case "cmdstat_evalsha", "cmdstat_eval":
					for _, f := range strings.Split(rest, ",") {
						k, v, _ := strings.Cut(f, "=")
						x, _ := strconv.ParseInt(v, 10, 64)
						switch k {
						case "calls":
							l.calls += x
						case "usec":
							l.usec += x
						}
					}
				case "total_reads_processed":
					x, _ := strconv.ParseInt(rest, 10, 64)
					l.reads += x
				}
			}
		}
	}
	return l
}
