package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// With a Redis Cluster, a call's descriptors are buckets on different
// slots (each bucket's keys share a hash tag, its own): a call refused by
// one leaves the other's count in Redis as it was.
func TestClusterRefusalAcrossSlotsTakesNothing(t *testing.T) {
	g := NewWithT(t)
	cluster := redistest.StartCluster(t, 3)
	dir := t.TempDir()
	writeFile(t, dir, "shop.yaml", `domain: shop
descriptors:
  - {key: user, rate_limit: {unit: hour, requests_per_unit: 5}}
  - {key: tenant, rate_limit: {unit: hour, requests_per_unit: 1}}
`)
	p := startProgram(t, dir, cluster.URL())
	call := func(ds ...*ratelimitv3common.RateLimitDescriptor) *ratelimitv3.RateLimitResponse {
		resp, err := shouldRateLimit(p.client, &ratelimitv3.RateLimitRequest{Domain: "shop", Descriptors: ds})
		g.Expect(err).NotTo(HaveOccurred())
		return resp
	}
	rdb := cluster.ClusterClient()
	ctx := context.Background()
	// bucketKeys are the keys of the rule's buckets, on every master.
	bucketKeys := func(rule string) []string {
		var mu sync.Mutex
		var out []string
		g.Expect(rdb.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			ks, err := node.Keys(ctx, "sl:{ratelimit/shop/"+rule+"/*").Result()
			mu.Lock()
			out = append(out, ks...)
			mu.Unlock()
			return err
		})).To(Succeed())
		return out
	}

	resp := call(desc("user", "ann"), desc("tenant", "acme"))
	g.Expect(resp.OverallCode).To(Equal(ok))
	users, tenants := bucketKeys("user"), bucketKeys("tenant")
	g.Expect(users).To(HaveLen(1))
	g.Expect(tenants).To(HaveLen(1))
	userSlot, err := rdb.ClusterKeySlot(ctx, users[0]).Result()
	g.Expect(err).NotTo(HaveOccurred())
	tenantSlot, err := rdb.ClusterKeySlot(ctx, tenants[0]).Result()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(userSlot).NotTo(Equal(tenantSlot), "the two buckets are on different slots")
	count := func() string {
		v, err := rdb.HGet(ctx, users[0], "c").Result()
		g.Expect(err).NotTo(HaveOccurred())
		return v
	}
	g.Expect(count()).To(Equal("1"))

	for range 3 {
		resp = call(desc("user", "ann"), desc("tenant", "acme"))
		g.Expect(resp.OverallCode).To(Equal(overLimit), "the tenant is over its limit of 1")
		g.Expect(resp.Statuses[0].Code).To(Equal(ok))
		g.Expect(resp.Statuses[1].Code).To(Equal(overLimit))
		g.Expect(count()).To(Equal("1"), "the user's count is as it was: the refused call took nothing")
	}
	resp = call(desc("user", "ann"))
	g.Expect(resp.OverallCode).To(Equal(ok))
	g.Expect(resp.Statuses[0].LimitRemaining).To(Equal(uint32(3)), "5, less the first call and this one")
	g.Expect(strings.Join(bucketKeys("user"), ",")).To(Equal(users[0]))
}
