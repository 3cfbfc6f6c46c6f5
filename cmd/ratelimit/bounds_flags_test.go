package main

import (
	"context"
	"testing"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/enforcer/rls"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

func TestBoundFlags(t *testing.T) {
	g := NewWithT(t)
	env := map[string]string{}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	o, _, err := parseFlags(nil, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.bounds).To(Equal(rls.DefaultBounds))
	env["SLUICE_MAX_DESCRIPTORS"], env["SLUICE_MAX_CALL_BYTES"] = "16", "4096"
	o, _, err = parseFlags([]string{"--max-descriptors", "8", "--max-entry-bytes", "512"}, lookup)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.bounds).To(Equal(rls.Bounds{Descriptors: 8, Entries: rls.DefaultBounds.Entries, EntryBytes: 512, CallBytes: 4096}), "the flag wins")
	_, _, err = parseFlags([]string{"--max-descriptor-entries", "0"}, lookup)
	g.Expect(err).To(MatchError(ContainSubstring("--max-descriptor-entries 0 must be at least 1")))
	env["SLUICE_MAX_ENTRY_BYTES"] = "lots"
	_, _, err = parseFlags(nil, lookup)
	g.Expect(err).To(MatchError(ContainSubstring(`SLUICE_MAX_ENTRY_BYTES="lots"`)))
}

// The built program refuses a call past --max-descriptors, counts it, and
// writes nothing to Redis.
func TestTheProgramRefusesACallPastItsBounds(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	writeFile(t, dir, "shop.yaml", "domain: shop\ndescriptors: [{key: user, rate_limit: {unit: hour, requests_per_unit: 5}}]\n")
	rs := redistest.Start(t)
	p := startProgram(t, dir, rs.URL(), "--max-descriptors", "3")
	call := func(n int) (*ratelimitv3.RateLimitResponse, error) {
		ds := make([]*ratelimitv3common.RateLimitDescriptor, n)
		for i := range ds {
			ds[i] = desc("user", string(rune('a'+i)))
		}
		return shouldRateLimit(p.client, &ratelimitv3.RateLimitRequest{Domain: "shop", Descriptors: ds})
	}
	_, err := call(4)
	g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument))
	g.Expect(status.Convert(err).Message()).To(Equal("4 descriptors: a call may have at most 3 (--max-descriptors)"))
	g.Expect(p.metric(`sluice_ratelimit_oversized_calls_total{bound="descriptors",domain="shop"}`)).To(Equal("1"))
	g.Expect(rs.Client().DBSize(context.Background()).Val()).To(BeZero(), "nothing written to Redis")
	resp, err := call(3)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Statuses).To(HaveLen(3))
	g.Expect(rs.Client().DBSize(context.Background()).Val()).To(BeEquivalentTo(3))
}
