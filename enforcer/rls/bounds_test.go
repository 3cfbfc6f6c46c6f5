package rls

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// users are n descriptors of distinct users: n buckets of a key-only rule.
func users(n int, prefix string) []*ratelimitv3common.RateLimitDescriptor {
	ds := make([]*ratelimitv3common.RateLimitDescriptor, n)
	for i := range ds {
		ds[i] = descriptor("user", fmt.Sprintf("%s%d", prefix, i))
	}
	return ds
}

func TestACallPastABoundIsRefusedBeforeRedis(t *testing.T) {
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+"\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 10}}]")
	b := DefaultBounds
	wide := descriptor("user", "ann")
	for i := range b.Entries {
		wide.Entries = append(wide.Entries, &ratelimitv3common.RateLimitDescriptor_Entry{Key: fmt.Sprintf("k%d", i), Value: "v"})
	}
	long := strings.Repeat("x", b.EntryBytes+1)
	// each value within EntryBytes, the call past CallBytes
	heavy := users(b.CallBytes/b.EntryBytes+1, "")
	for _, d := range heavy {
		d.Entries[0].Value = strings.Repeat("y", b.EntryBytes-8) + d.Entries[0].Value
	}
	cases := []struct {
		bound, flag string
		ds          []*ratelimitv3common.RateLimitDescriptor
	}{
		{boundDescriptors, "--max-descriptors", users(b.Descriptors+1, "u")},
		{boundDescriptors, "--max-descriptors", users(60_000, "u")},
		{boundEntries, "--max-descriptor-entries", append(users(3, "u"), wide)},
		{boundEntryBytes, "--max-entry-bytes", []*ratelimitv3common.RateLimitDescriptor{descriptor("user", long)}},
		{boundEntryBytes, "--max-entry-bytes", []*ratelimitv3common.RateLimitDescriptor{descriptor(long, "ann")}},
		{boundCallBytes, "--max-call-bytes", heavy},
	}
	for _, c := range cases {
		g := NewWithT(t)
		before := testutil.ToFloat64(in.metrics.oversizedN.WithLabelValues(domain, c.bound))
		_, err := in.client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: domain, Descriptors: c.ds})
		g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument), c.bound)
		g.Expect(status.Convert(err).Message()).To(ContainSubstring(c.flag), "the refusal names the bound")
		g.Expect(testutil.ToFloat64(in.metrics.oversizedN.WithLabelValues(domain, c.bound))).To(Equal(before+1), c.bound)
		g.Expect(keys(t, domain)).To(BeEmpty(), "%s: nothing counted in Redis", c.bound)
	}
	g := NewWithT(t)
	g.Expect(testutil.ToFloat64(in.metrics.degradedN)).To(BeZero(), "no failure mode decided")
	g.Expect(testutil.CollectAndCount(in.metrics.calls)).To(BeZero(), "no call answered")

	// At the bounds, every descriptor is decided.
	resp := in.call(t, domain, 0, users(b.Descriptors, "u")...)
	g.Expect(resp.OverallCode).To(Equal(ok))
	g.Expect(resp.Statuses).To(HaveLen(b.Descriptors))
	g.Expect(keys(t, domain)).To(HaveLen(b.Descriptors))
	wide.Entries = wide.Entries[:b.Entries]
	g.Expect(in.call(t, domain, 0, wide).OverallCode).To(Equal(ok))
	g.Expect(in.call(t, domain, 0, descriptor("user", strings.Repeat("x", b.EntryBytes))).OverallCode).To(Equal(ok))
}

func TestBoundsAreSet(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+"\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 10}}]")
	g.Expect(in.svc.SetBounds(Bounds{Descriptors: 2, Entries: 2, EntryBytes: 16, CallBytes: 40})).To(Succeed())
	_, err := in.client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: domain, Descriptors: users(3, "u")})
	g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument))
	g.Expect(in.call(t, domain, 0, users(2, "u")...).OverallCode).To(Equal(ok))
	g.Expect(in.svc.SetBounds(Bounds{Descriptors: 0, Entries: 2, EntryBytes: 16, CallBytes: 40})).To(MatchError(ContainSubstring("descriptors")))
}

// TestOversizedCallsLeaveOtherTenantsExact runs callers that send one
// domain calls of 30,000 descriptors, and others that send the largest
// calls the bounds admit, while a tenant of another domain makes 100
// calls against its limit of 5: it is admitted exactly 5 times. Unbounded, the huge calls
// kept Redis busy past the tenant's timeout, and its Open failure mode
// admitted it uncounted.
func TestOversizedCallsLeaveOtherTenantsExact(t *testing.T) {
	g := NewWithT(t)
	shop, victim := domainFor(t), domainFor(t)+"-victim"
	in := serve(t, "domain: "+shop+"\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 1000000}}]",
		"domain: "+victim+"\nsluice: {failureMode: Open, timeout: 1s}\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 5}}]")
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 4 {
		n := 30_000
		if i%2 == 1 {
			n = DefaultBounds.Descriptors
		}
		ds := users(n, fmt.Sprintf("a%d-", i))
		wg.Go(func() {
			for ctx.Err() == nil {
				_, _ = in.client.ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{Domain: shop, Descriptors: ds})
			}
		})
	}
	// the attackers' first calls under way
	time.Sleep(200 * time.Millisecond)
	admitted := 0
	start := time.Now()
	for range 100 {
		resp, err := in.client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: victim,
			Descriptors: []*ratelimitv3common.RateLimitDescriptor{descriptor("user", "eve")}})
		g.Expect(err).NotTo(HaveOccurred())
		if resp.OverallCode == ok {
			admitted++
		}
	}
	stop()
	wg.Wait()
	t.Logf("victim done at %s", time.Since(start))
	g.Expect(admitted).To(Equal(5), "the tenant's limit, exactly")
}

// TestChecksWithoutCountingShareOneRoundTrip sends a call of descriptors
// with hits_addend 0 while Redis does not answer: their domain's failure
// mode answers them all after one timeout, within the caller's deadline.
// Checked one after another, each waited its own timeout in turn.
func TestChecksWithoutCountingShareOneRoundTrip(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	rs := redistest.Start(t)
	in := serveOn(t, rs, "domain: "+domain+"\nsluice: {failureMode: Open, timeout: 50ms}\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 5}}]")
	ds := users(DefaultBounds.Descriptors, "u")
	for _, d := range ds {
		d.HitsAddend = wrapperspb.UInt64(0)
	}
	in.call(t, domain, 0, ds...) // connected, scripts loaded
	before := testutil.ToFloat64(in.metrics.degradedN)
	rs.Freeze()
	defer rs.Thaw()
	// Envoy's rate limit filter waits 20ms by default; 5s leaves room for a
	// busy machine, and is far below 256 timeouts of 50ms in turn.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := in.client.ShouldRateLimit(ctx, &ratelimitv3.RateLimitRequest{Domain: domain, Descriptors: ds})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.OverallCode).To(Equal(ok), "the Open failure mode admits")
	g.Expect(testutil.ToFloat64(in.metrics.degradedN)-before).To(BeEquivalentTo(len(ds)), "every descriptor decided by the failure mode")
}

// TestLargeCallsShareOneBudget holds the large calls' budget, as large
// calls in flight would: a large call waits for it and is then refused
// with ResourceExhausted, counting nothing, while a small call is decided
// at once; once the budget is free, the large call is decided.
func TestLargeCallsShareOneBudget(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+"\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 10}}]")
	sem := in.svc.large.Load().sem
	g.Expect(sem.Acquire(context.Background(), int64(DefaultBounds.Descriptors-largeCall))).To(Succeed())
	large := users(largeCall+1, "large-")
	_, err := in.client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: domain, Descriptors: large})
	g.Expect(status.Code(err)).To(Equal(codes.ResourceExhausted))
	g.Expect(testutil.ToFloat64(in.metrics.oversizedN.WithLabelValues(domain, boundInFlight))).To(Equal(1.0))
	g.Expect(keys(t, domain)).To(BeEmpty(), "the refused call counted nothing")
	g.Expect(in.call(t, domain, 0, users(largeCall, "small-")...).OverallCode).To(Equal(ok), "a call of 16 takes no budget")
	sem.Release(int64(DefaultBounds.Descriptors - largeCall))
	g.Expect(in.call(t, domain, 0, large...).OverallCode).To(Equal(ok))
	g.Expect(keys(t, domain)).To(HaveLen(2*largeCall + 1))
}
