package rls

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func withOverride(d *ratelimitv3common.RateLimitDescriptor, requests uint32, unit typev3.RateLimitUnit) *ratelimitv3common.RateLimitDescriptor {
	d.Limit = &ratelimitv3common.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: requests, Unit: unit}
	return d
}

func negative(d *ratelimitv3common.RateLimitDescriptor, hits uint64) *ratelimitv3common.RateLimitDescriptor {
	d.IsNegativeHits = true
	d.HitsAddend = wrapperspb.UInt64(hits)
	return d
}

// admitted counts the calls of d that are admitted, out of n.
func (in *instance) admitted(t *testing.T, domain string, n int, d func() *ratelimitv3common.RateLimitDescriptor) int {
	t.Helper()
	ok := 0
	for range n {
		if in.call(t, domain, 0, d()).OverallCode == ratelimitv3.RateLimitResponse_OK {
			ok++
		}
	}
	return ok
}

func TestLimitOverride(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+`
descriptors:
  - {key: user, rate_limit: {unit: hour, requests_per_unit: 5, name: per-user}}
  - {key: vip, rate_limit: {unlimited: true}}
  - {key: ip, shadow_mode: true, rate_limit: {unit: hour, requests_per_unit: 1}}
  - {key: remote, rate_limit: {unit: hour, requests_per_unit: 100, name: per-remote}}
  - {key: tenant, rate_limit: {unit: hour, requests_per_unit: 100, replaces: [{name: per-remote}]}}
`)
	// the override limits at its own rate: 2 per minute, not the rule's 5 per hour
	resp := in.call(t, domain, 0, withOverride(descriptor("user", "ann"), 2, typev3.RateLimitUnit_MINUTE))
	g.Expect(resp.OverallCode).To(Equal(ok))
	st := resp.Statuses[0]
	g.Expect(st.CurrentLimit.RequestsPerUnit).To(Equal(uint32(2)))
	g.Expect(st.CurrentLimit.Unit).To(Equal(ratelimitv3.RateLimitResponse_RateLimit_MINUTE))
	g.Expect(st.CurrentLimit.Name).To(BeEmpty(), "an override has no name")
	g.Expect(st.LimitRemaining).To(Equal(uint32(1)))
	g.Expect(in.call(t, domain, 0, withOverride(descriptor("user", "ann"), 2, typev3.RateLimitUnit_MINUTE)).OverallCode).To(Equal(ok))
	resp = in.call(t, domain, 0, withOverride(descriptor("user", "ann"), 2, typev3.RateLimitUnit_MINUTE))
	g.Expect(resp.OverallCode).To(Equal(overLimit), "refused at the override's 2, under the rule's 5")
	g.Expect(resp.Statuses[0].DurationUntilReset.AsDuration()).To(And(BeNumerically(">", 0), BeNumerically("<=", time.Minute)))

	// an override of another unit counts in its own window: the rule's
	// hourly window holds nothing of the override's minute
	resp = in.call(t, domain, 0, descriptor("user", "ann"))
	g.Expect(resp.OverallCode).To(Equal(ok))
	g.Expect(resp.Statuses[0].LimitRemaining).To(Equal(uint32(4)), "the rule's window counts this call only")
	g.Expect(resp.Statuses[0].CurrentLimit.Name).To(Equal("per-user"))

	// of the rule's unit, it counts in the rule's own window, as
	// envoyproxy/ratelimit's key (domain, entries, window start) does,
	// whatever its rate
	resp = in.call(t, domain, 0, withOverride(descriptor("user", "ann"), 3, typev3.RateLimitUnit_HOUR))
	g.Expect(resp.Statuses[0].LimitRemaining).To(Equal(uint32(1)), "1 counted by the rule, this call: 2 of 3")
	g.Expect(in.call(t, domain, 0, withOverride(descriptor("user", "ann"), 3, typev3.RateLimitUnit_HOUR)).OverallCode).To(Equal(ok))
	g.Expect(in.call(t, domain, 0, withOverride(descriptor("user", "ann"), 3, typev3.RateLimitUnit_HOUR)).OverallCode).To(Equal(overLimit))
	g.Expect(in.call(t, domain, 0, descriptor("user", "ann")).Statuses[0].LimitRemaining).To(Equal(uint32(1)), "the rule sees the override's 3")

	// it applies where no rule does, and over unlimited and shadow rules
	g.Expect(in.admitted(t, domain, 3, func() *ratelimitv3common.RateLimitDescriptor {
		return withOverride(descriptor("color", "red"), 2, typev3.RateLimitUnit_HOUR)
	})).To(Equal(2), "no rule")
	g.Expect(in.admitted(t, domain, 3, func() *ratelimitv3common.RateLimitDescriptor {
		return withOverride(descriptor("vip", "x"), 1, typev3.RateLimitUnit_HOUR)
	})).To(Equal(1), "unlimited rule")
	g.Expect(in.admitted(t, domain, 3, func() *ratelimitv3common.RateLimitDescriptor {
		return withOverride(descriptor("ip", "10.0.0.1"), 2, typev3.RateLimitUnit_HOUR)
	})).To(Equal(2), "a shadow_mode rule's override is enforced")
	g.Expect(testutil.ToFloat64(in.metrics.descriptors.WithLabelValues(domain, overrideRule, outcomeOverLimit))).To(Equal(1.0))

	// an override neither replaces nor is replaced
	resp = in.call(t, domain, 0, descriptor("remote", "10.0.0.2"), withOverride(descriptor("tenant", "acme"), 10, typev3.RateLimitUnit_HOUR))
	g.Expect(resp.Statuses[0].CurrentLimit.GetName()).To(Equal("per-remote"), "the tenant rule's replaces do not apply")

	// 0 requests refuses every hit, without Redis
	resp = in.call(t, domain, 0, withOverride(descriptor("color", "blue"), 0, typev3.RateLimitUnit_SECOND))
	g.Expect(resp.OverallCode).To(Equal(overLimit))
	g.Expect(resp.Statuses[0].CurrentLimit.RequestsPerUnit).To(BeZero())
	g.Expect(resp.Statuses[0].DurationUntilReset.AsDuration()).To(And(BeNumerically(">", 0), BeNumerically("<=", time.Second)))

	// in a domain the configuration does not have, nothing applies
	g.Expect(in.call(t, domain+"-none", 0, withOverride(descriptor("user", "ann"), 0, typev3.RateLimitUnit_SECOND)).OverallCode).To(Equal(ok))

	// a unit that is none
	for _, u := range []typev3.RateLimitUnit{typev3.RateLimitUnit_UNKNOWN, 42} {
		_, err := in.client.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: domain,
			Descriptors: []*ratelimitv3common.RateLimitDescriptor{withOverride(descriptor("user", "ann"), 2, u)}})
		g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument), "unit %d", u)
	}
}

func TestNegativeHitsGiveBackUpToTheLimit(t *testing.T) {
	for _, algo := range []string{"FixedWindow", "TokenBucket", "GCRA", "SlidingWindowLog", "SlidingWindowCounter"} {
		t.Run(algo, func(t *testing.T) {
			g := NewWithT(t)
			domain := domainFor(t)
			in := serve(t, "domain: "+domain+"\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 5, sluice: {algorithm: "+algo+"}}}]")
			user := func() *ratelimitv3common.RateLimitDescriptor { return descriptor("user", "ann") }
			g.Expect(in.admitted(t, domain, 4, user)).To(Equal(4))

			resp := in.call(t, domain, 0, negative(user(), 2))
			g.Expect(resp.OverallCode).To(Equal(ok))
			g.Expect(resp.Statuses[0].Code).To(Equal(ok))
			g.Expect(resp.Statuses[0].LimitRemaining).To(Equal(uint32(3)), "4 used, 2 given back: the current state")
			g.Expect(resp.Statuses[0].CurrentLimit.RequestsPerUnit).To(Equal(uint32(5)))

			// many negative calls never give more than was taken
			for range 20 {
				g.Expect(in.call(t, domain, 0, negative(user(), 1000)).OverallCode).To(Equal(ok))
			}
			g.Expect(in.call(t, domain, 0, negative(user(), 1)).Statuses[0].LimitRemaining).To(Equal(uint32(5)), "full, not more")
			g.Expect(in.admitted(t, domain, 10, user)).To(Equal(5), "after any refunds, at most the limit")
			// a refusal the guard holds does not hide what is given back
			g.Expect(in.call(t, domain, 0, negative(user(), 2)).Statuses[0].LimitRemaining).To(Equal(uint32(2)))
			g.Expect(in.admitted(t, domain, 4, user)).To(Equal(2))

			// on a full bucket a negative call is still answered OK
			resp = in.call(t, domain, 0, negative(user(), 0))
			g.Expect(resp.OverallCode).To(Equal(ok))
			g.Expect(resp.Statuses[0].LimitRemaining).To(BeZero(), "hits_addend 0 gives nothing back")
			g.Expect(testutil.ToFloat64(in.metrics.descriptors.WithLabelValues(domain, "user", outcomeGivenBack))).To(Equal(24.0))
		})
	}
}

func TestNegativeHitsBesideOtherDescriptors(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+`
descriptors:
  - {key: user, rate_limit: {unit: hour, requests_per_unit: 2}}
  - {key: tenant, rate_limit: {unit: hour, requests_per_unit: 1}}
`)
	g.Expect(in.admitted(t, domain, 2, func() *ratelimitv3common.RateLimitDescriptor { return descriptor("user", "ann") })).To(Equal(2))
	// the give back comes first: the same call can use it
	resp := in.call(t, domain, 0, negative(descriptor("user", "ann"), 1), descriptor("user", "ann"))
	g.Expect(resp.OverallCode).To(Equal(ok))
	g.Expect(resp.Statuses[1].LimitRemaining).To(BeZero())
	g.Expect(in.call(t, domain, 0, descriptor("tenant", "acme")).OverallCode).To(Equal(ok))
	// a full bucket's negative descriptor does not refuse the call
	resp = in.call(t, domain, 0, negative(descriptor("tenant", "acme"), 0), descriptor("user", "bob"))
	g.Expect(resp.OverallCode).To(Equal(ok))
}

// headerMap is a response's headers to add, by name.
func headerMap(hs []*corev3.HeaderValue) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		m[h.Key] = h.Value
	}
	return m
}

func TestResponseHeaders(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+`
descriptors:
  - {key: user, rate_limit: {unit: hour, requests_per_unit: 3}}
  - {key: tenant, rate_limit: {unit: minute, requests_per_unit: 10}}
`)
	call := func(ds ...*ratelimitv3common.RateLimitDescriptor) *ratelimitv3.RateLimitResponse {
		return in.call(t, domain, 0, ds...)
	}
	g.Expect(call(descriptor("user", "ann")).ResponseHeadersToAdd).To(BeEmpty(), "off unless configured")

	in.svc.SetResponseHeaders(ResponseHeaders{ERL: true, XRateLimit: true, IETF: true})
	before := time.Now()
	resp := call(descriptor("tenant", "acme"), descriptor("user", "ann"))
	g.Expect(resp.OverallCode).To(Equal(ok))
	h := headerMap(resp.ResponseHeadersToAdd)
	g.Expect(h).To(HaveLen(8), "no Retry-After when admitted")
	// the descriptor closest to its limit: user, 1 of 3 left
	g.Expect(h).To(HaveKeyWithValue("RateLimit-Limit", "3"))
	g.Expect(h).To(HaveKeyWithValue("RateLimit-Remaining", "1"))
	g.Expect(h).To(HaveKeyWithValue("X-RateLimit-Limit", "3"))
	g.Expect(h).To(HaveKeyWithValue("X-RateLimit-Remaining", "1"))
	hourEnd := before.Truncate(time.Hour).Add(time.Hour)
	reset, err := strconv.Atoi(h["RateLimit-Reset"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reset).To(BeNumerically("~", hourEnd.Sub(before).Seconds(), 2), "seconds to the hour, as ERL")
	g.Expect(h).To(HaveKeyWithValue("X-RateLimit-Reset", strconv.FormatInt(hourEnd.Unix(), 10)), "the Unix second the window resets")
	g.Expect(h).To(HaveKeyWithValue("RateLimit-Policy", `"`+domain+`/tenant";q=10;w=60, "`+domain+`/user";q=3;w=3600`))
	g.Expect(h["RateLimit"]).To(MatchRegexp(`^"` + domain + `/tenant";r=9;t=\d+, "` + domain + `/user";r=1;t=\d+$`))

	call(descriptor("user", "ann"))
	resp = call(descriptor("tenant", "acme"), descriptor("user", "ann"))
	g.Expect(resp.OverallCode).To(Equal(overLimit))
	h = headerMap(resp.ResponseHeadersToAdd)
	g.Expect(h).To(HaveKeyWithValue("RateLimit-Remaining", "0"))
	g.Expect(h).To(HaveKeyWithValue("X-RateLimit-Limit", "3"), "the refused descriptor")
	g.Expect(h).To(HaveKeyWithValue("X-RateLimit-Remaining", "0"))
	retry, err := strconv.Atoi(h["Retry-After"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(retry).To(BeNumerically("~", time.Until(hourEnd).Seconds(), 2), "until the hour's window resets")
	g.Expect(h["RateLimit"]).To(ContainSubstring(`"`+domain+`/tenant";r=9;`), "the refused call's tenant units were given back")

	in.svc.SetResponseHeaders(ResponseHeaders{ERL: true, ERLLimit: "X-Quota"})
	h = headerMap(call(descriptor("tenant", "acme")).ResponseHeadersToAdd)
	g.Expect(h).To(HaveKeyWithValue("X-Quota", "10"))
	g.Expect(h).To(HaveKey("RateLimit-Remaining"))
	g.Expect(h).NotTo(HaveKey("RateLimit-Policy"))
	g.Expect(h).NotTo(HaveKey("X-RateLimit-Limit"))

	g.Expect(ResponseHeaders{ERL: true, IETF: true, ERLReset: "ratelimit"}.Validate()).To(MatchError(ContainSubstring("twice")))
	g.Expect(ResponseHeaders{ERL: true, ERLReset: "bad name"}.Validate()).To(HaveOccurred())
	g.Expect(ResponseHeaders{ERL: true, XRateLimit: true, IETF: true}.Validate()).To(Succeed())
}

// TestABucketsHeadersCountFromItsBurst decides a token bucket of 10 a
// second with a burst of 50: every header counts from the burst, so that
// what remains is never above the limit stated beside it, and
// RateLimit-Policy states the burst as quota over the time the bucket takes
// to fill again (q=50;w=5: 50 at once, 10 a second).
func TestABucketsHeadersCountFromItsBurst(t *testing.T) {
	g := NewWithT(t)
	domain := domainFor(t)
	in := serve(t, "domain: "+domain+`
descriptors:
  - {key: user, rate_limit: {unit: second, requests_per_unit: 10, sluice: {algorithm: TokenBucket, burst: 50, leasing: "Off"}}}
`)
	in.svc.SetResponseHeaders(ResponseHeaders{ERL: true, XRateLimit: true, IETF: true})
	resp := in.call(t, domain, 0, descriptor("user", "ann"))
	g.Expect(resp.OverallCode).To(Equal(ok))
	h := headerMap(resp.ResponseHeadersToAdd)
	g.Expect(h).To(HaveKeyWithValue("RateLimit-Remaining", "49"))
	g.Expect(h).To(HaveKeyWithValue("RateLimit-Limit", "50"), "remaining counts down from the burst")
	g.Expect(h).To(HaveKeyWithValue("X-RateLimit-Limit", "50"))
	g.Expect(h).To(HaveKeyWithValue("RateLimit-Policy", `"`+domain+`/user";q=50;w=5`))
	g.Expect(h["RateLimit"]).To(HavePrefix(`"` + domain + `/user";r=49;`))
}
