package rls

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rls/erlconfig"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

var redisServer *redistest.Server

func TestMain(m *testing.M) {
	os.Exit(func() int {
		var err error
		if redisServer, err = redistest.New(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer redisServer.Close()
		return m.Run()
	}())
}

// instance is one service on a loopback gRPC port, with its client.
type instance struct {
	svc     *Service
	client  ratelimitv3.RateLimitServiceClient
	metrics *Metrics
}

// serve starts a service deciding files' domains with the test Redis.
func serve(t testing.TB, files ...string) *instance {
	t.Helper()
	return serveOn(t, redisServer, files...)
}

// serveOn starts a service deciding files' domains with srv.
func serveOn(t testing.TB, rs *redistest.Server, files ...string) *instance {
	t.Helper()
	g := NewWithT(t)
	client, err := limiter.NewClient(rs.URL(), limiter.ClientOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	r, err := limiter.NewRedis(client)
	g.Expect(err).NotTo(HaveOccurred())
	guard := limiter.NewGuard(r)
	in := &instance{metrics: NewMetrics(prometheus.NewRegistry())}
	in.svc = NewService(guard, r, in.metrics)
	var parsed []*erlconfig.File
	for _, f := range files {
		p, err := erlconfig.Parse("test.yaml", []byte(f))
		g.Expect(err).NotTo(HaveOccurred())
		parsed = append(parsed, p)
	}
	// A busy machine can keep Redis past the 50ms default, and the Open
	// failure mode would then decide: the tests want Redis' answers.
	cfg, err := erlconfig.Compile(parsed, erlconfig.Options{Timeout: time.Second})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in.svc.Apply(context.Background(), cfg)).To(Succeed())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	srv := grpc.NewServer()
	ratelimitv3.RegisterRateLimitServiceServer(srv, in.svc)
	go func() { _ = srv.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	in.client = ratelimitv3.NewRateLimitServiceClient(conn)
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		guard.Close()
		_ = r.Close()
		_ = client.Close()
	})
	return in
}

// domainFor is a domain of the test's own, so that tests share no bucket.
func domainFor(t *testing.T) string {
	return fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
}

func descriptor(kv ...string) *ratelimitv3common.RateLimitDescriptor {
	return &ratelimitv3common.RateLimitDescriptor{Entries: entries(kv...)}
}

func (in *instance) call(t *testing.T, domain string, hits uint32, ds ...*ratelimitv3common.RateLimitDescriptor) *ratelimitv3.RateLimitResponse {
	t.Helper()
	resp, err := in.client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: hits})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

const ok, overLimit = ratelimitv3.RateLimitResponse_OK, ratelimitv3.RateLimitResponse_OVER_LIMIT

// rdb reads the test Redis directly.
func rdb(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: redisServer.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// keys are the Redis keys of domain's buckets.
func keys(t *testing.T, domain string) []string {
	t.Helper()
	ks, err := rdb(t).Keys(context.Background(), "sl:{"+erlconfig.DefaultNamespace+"/"+domain+"/*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestFixedWindowAnswersAsEnvoyRatelimit(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+"\ndescriptors: [{key: user, rate_limit: {unit: minute, requests_per_unit: 3, name: per-user}}]")
	for want := uint32(2); ; want-- {
		resp := in.call(t, domain, 0, descriptor("user", "ann"))
		g.Expect(resp.OverallCode).To(Equal(ok))
		st := resp.Statuses[0]
		g.Expect(st.Code).To(Equal(ok))
		g.Expect(st.CurrentLimit.Name).To(Equal("per-user"))
		g.Expect(st.CurrentLimit.RequestsPerUnit).To(Equal(uint32(3)))
		g.Expect(st.CurrentLimit.Unit).To(Equal(ratelimitv3.RateLimitResponse_RateLimit_MINUTE))
		g.Expect(st.LimitRemaining).To(Equal(want))
		g.Expect(st.DurationUntilReset.AsDuration()).To(And(BeNumerically(">", 0), BeNumerically("<=", time.Minute)))
		if want == 0 {
			break
		}
	}
	resp := in.call(t, domain, 0, descriptor("user", "ann"))
	g.Expect(resp.OverallCode).To(Equal(overLimit))
	g.Expect(resp.Statuses[0].Code).To(Equal(overLimit))
	g.Expect(resp.Statuses[0].LimitRemaining).To(BeZero())
	g.Expect(resp.Statuses[0].DurationUntilReset.AsDuration()).To(And(BeNumerically(">", 0), BeNumerically("<=", time.Minute)))

	g.Expect(in.call(t, domain, 0, descriptor("user", "bob")).OverallCode).To(Equal(ok), "each value of a key-only rule has its own bucket")
	g.Expect(keys(t, domain)).To(HaveLen(2))
}

func TestDescriptorsWithoutALimit(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+`
descriptors:
  - {key: free, rate_limit: {unlimited: true}}
  - {key: user, value: admin, rate_limit: {unlimited: true}}
  - {key: user, rate_limit: {unit: second, requests_per_unit: 1}}
`)
	for range 3 {
		resp := in.call(t, domain, 0, descriptor("free", "x"), descriptor("user", "admin"), descriptor("color", "red"))
		g.Expect(resp.OverallCode).To(Equal(ok))
		g.Expect(resp.Statuses[0].LimitRemaining).To(Equal(uint32(math.MaxUint32)), "unlimited")
		g.Expect(resp.Statuses[0].CurrentLimit).To(BeNil())
		g.Expect(resp.Statuses[1].LimitRemaining).To(Equal(uint32(math.MaxUint32)), "an unlimited exact value under a limited key")
		g.Expect(resp.Statuses[2].LimitRemaining).To(BeZero(), "no rule")
		g.Expect(resp.Statuses[2].CurrentLimit).To(BeNil())
	}
	g.Expect(keys(t, domain)).To(BeEmpty(), "neither asks Redis")
	g.Expect(in.call(t, "no-such-domain", 0, descriptor("user", "x")).OverallCode).To(Equal(ok))
	g.Expect(testutil.ToFloat64(in.metrics.descriptors.WithLabelValues("", "", outcomeNoRule))).To(Equal(1.0))
}

func TestReplaces(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+`
descriptors:
  - {key: remote_address, rate_limit: {unit: minute, requests_per_unit: 1, name: per-ip}}
  - {key: user, rate_limit: {unit: minute, requests_per_unit: 5, name: per-user, replaces: [{name: per-ip}]}}
`)
	for range 3 {
		resp := in.call(t, domain, 0, descriptor("remote_address", "10.1.1.1"), descriptor("user", "ann"))
		g.Expect(resp.OverallCode).To(Equal(ok), "the per-ip limit is replaced whenever per-user matches too")
		g.Expect(resp.Statuses[0].CurrentLimit).To(BeNil())
		g.Expect(resp.Statuses[1].CurrentLimit.Name).To(Equal("per-user"))
	}
	g.Expect(in.call(t, domain, 0, descriptor("remote_address", "10.1.1.1")).OverallCode).To(Equal(ok), "alone, per-ip applies: nothing was counted in it")
	g.Expect(in.call(t, domain, 0, descriptor("remote_address", "10.1.1.1")).OverallCode).To(Equal(overLimit))
}

func TestShadowModeCountsWhatItWouldRefuse(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+"\ndescriptors: [{key: user, shadow_mode: true, rate_limit: {unit: hour, requests_per_unit: 1}}]")
	for range 3 {
		resp := in.call(t, domain, 0, descriptor("user", "ann"))
		g.Expect(resp.OverallCode).To(Equal(ok))
		g.Expect(resp.Statuses[0].Code).To(Equal(ok))
	}
	g.Expect(testutil.ToFloat64(in.metrics.descriptors.WithLabelValues(domain, "user", outcomeShadowOverLimit))).To(Equal(2.0))
	g.Expect(testutil.ToFloat64(in.metrics.descriptors.WithLabelValues(domain, "user", outcomeAllowed))).To(Equal(1.0))
}

func TestHitsAddend(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+"\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 5}}]")
	with := func(hits uint64) *ratelimitv3common.RateLimitDescriptor {
		d := descriptor("user", "ann")
		d.HitsAddend = wrapperspb.UInt64(hits)
		return d
	}
	remaining := func(resp *ratelimitv3.RateLimitResponse) uint32 { return resp.Statuses[0].LimitRemaining }

	g.Expect(remaining(in.call(t, domain, 0, descriptor("user", "ann")))).To(Equal(uint32(4)), "a call's 0 counts 1")
	g.Expect(remaining(in.call(t, domain, 2, descriptor("user", "ann")))).To(Equal(uint32(2)), "the call's hits_addend")
	resp := in.call(t, domain, 3, with(0))
	g.Expect(resp.OverallCode).To(Equal(ok))
	g.Expect(remaining(resp)).To(Equal(uint32(2)), "a descriptor's explicit 0 checks without counting, whatever the call says")
	g.Expect(remaining(in.call(t, domain, 0, with(2)))).To(BeZero(), "a descriptor's own hits_addend")
	resp = in.call(t, domain, 0, with(0))
	g.Expect(resp.OverallCode).To(Equal(overLimit), "0 hits on a full bucket: the next request would be refused")
	g.Expect(remaining(resp)).To(BeZero())

	other := domainFor(t) + "-b"
	in2 := serve(t, "domain: "+other+"\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 5}}]")
	g.Expect(in2.call(t, other, 6, descriptor("user", "ann")).OverallCode).To(Equal(overLimit), "more than the limit at once")
	g.Expect(remaining(in2.call(t, other, 5, descriptor("user", "ann")))).To(BeZero(), "the refusal took nothing")
}

func TestARefusedCallConsumesNothing(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+`
descriptors:
  - {key: user, rate_limit: {unit: hour, requests_per_unit: 10, sluice: {leasing: "Off"}}}
  - {key: tenant, rate_limit: {unit: hour, requests_per_unit: 1, sluice: {leasing: "Off"}}}
  - {key: ip, rate_limit: {unit: hour, requests_per_unit: 10, sluice: {algorithm: SlidingWindowLog}}}
`)
	call := func() *ratelimitv3.RateLimitResponse {
		return in.call(t, domain, 0, descriptor("user", "ann"), descriptor("tenant", "acme"), descriptor("ip", "10.0.0.9"))
	}
	g.Expect(call().OverallCode).To(Equal(ok))
	resp := call()
	g.Expect(resp.OverallCode).To(Equal(overLimit))
	g.Expect(resp.Statuses[0].Code).To(Equal(ok))
	g.Expect(resp.Statuses[0].LimitRemaining).To(Equal(uint32(9)), "what the refused call took was given back")
	g.Expect(resp.Statuses[1].Code).To(Equal(overLimit))

	tab := in.svc.Table()
	user := entries("user", "ann")
	key := fmt.Sprintf("sl:{%s/%s/user/%s}:fw:3600s", erlconfig.DefaultNamespace, domain, tab.Match(domain, user).Tenant(user))
	count, err := rdb(t).HGet(context.Background(), key, "c").Int()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(count).To(Equal(1), "Redis holds the first call's request only")
	ip := entries("ip", "10.0.0.9")
	logKey := fmt.Sprintf("sl:{%s/%s/ip/%s}:swl:3600s", erlconfig.DefaultNamespace, domain, tab.Match(domain, ip).Tenant(ip))
	g.Expect(rdb(t).ZCard(context.Background(), logKey).Val()).To(Equal(int64(1)), "in a sliding log too")
}

func TestAPeriodOfNoWholeUnit(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+`
descriptors:
  - {key: a, rate_limit: {requests_per_unit: 100, sluice: {period: 5m}}}
  - {key: b, rate_limit: {requests_per_unit: 100, name: slow, sluice: {algorithm: TokenBucket, period: 90s, burst: 10}}}
`)
	resp := in.call(t, domain, 0, descriptor("a", "x"), descriptor("b", "x"))
	g.Expect(resp.Statuses[0].CurrentLimit.Unit).To(Equal(ratelimitv3.RateLimitResponse_RateLimit_UNKNOWN))
	g.Expect(resp.Statuses[0].CurrentLimit.Name).To(Equal("100/5m"))
	g.Expect(resp.Statuses[0].CurrentLimit.RequestsPerUnit).To(Equal(uint32(100)))
	g.Expect(resp.Statuses[1].CurrentLimit.Name).To(Equal("slow (100/90s)"))
	g.Expect(resp.Statuses[1].LimitRemaining).To(Equal(uint32(9)), "a token bucket's burst")
}

func TestInvalidCalls(t *testing.T) {
	g := NewWithT(t)
	in := serve(t, "domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]")
	_, err := in.client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Descriptors: []*ratelimitv3common.RateLimitDescriptor{descriptor("k", "v")}})
	g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument))
	_, err = in.client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: "d"})
	g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument))
}

func TestTwoInstancesSharingRedisNeverOverAdmit(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	file := "domain: " + domain + `
descriptors:
  - {key: user, rate_limit: {unit: day, requests_per_unit: 50}}
  - {key: tenant, rate_limit: {requests_per_unit: 30, sluice: {algorithm: GCRA, period: 24h}}}
`
	a, b := serve(t, file), serve(t, file)
	for _, d := range []struct {
		desc  *ratelimitv3common.RateLimitDescriptor
		limit int64
	}{{descriptor("user", "ann"), 50}, {descriptor("tenant", "acme"), 30}} {
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for _, in := range []*instance{a, b} {
			for range 4 {
				wg.Go(func() {
					for range 25 {
						resp, err := in.client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: domain,
							Descriptors: []*ratelimitv3common.RateLimitDescriptor{d.desc}})
						if err == nil && resp.OverallCode == ok {
							admitted.Add(1)
						}
					}
				})
			}
		}
		wg.Wait()
		g.Expect(admitted.Load()).To(Equal(d.limit), "200 calls from two instances admit exactly the limit")
	}
}
