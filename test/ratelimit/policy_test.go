/*
Copyright 2026 The Sluice Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package ratelimit holds the tests that join the two sides of the rate
// limit service: a rateLimitService RateLimitPolicy, admitted as the API
// server admits it and compiled by the manager's compiler, decided by the
// service (enforcer/rls) as it decides envoyproxy/ratelimit files. The
// data plane cannot import the compiler, so the test lives here.
package ratelimit

import (
	"context"
	"fmt"
	"os"
	"testing"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rls"
	"github.com/sluice-dev/sluice/internal/compile"
	"github.com/sluice-dev/sluice/internal/policyfile"
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

// checkout limits each user of a checkout by plan, with a bigger budget for
// one customer; PDFs share one bucket; health checks are not limited. The
// sidecar policy next to it is the enforcers', not the service's.
const checkout = `
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: checkout, namespace: shop}
spec:
  rateLimitService: {domain: edge}
  identity: {sources: [{descriptor: {key: user_id}}]}
  tiers: {source: {descriptor: {key: plan}}, default: free}
  rules:
    - name: checkout
      match: {descriptors: [{key: generic_key, value: checkout}, {key: user_id}, {key: plan}]}
      algorithm: FixedWindow
      limits:
        - {tier: free, requests: 2, period: 1m}
        - {tier: gold, requests: 4, period: 1m}
    - name: pdf
      match: {descriptors: [{key: path, value: "*.pdf"}]}
      identity: {sources: [{shared: {}}]}
      limits: [{requests: 1, period: 1m}]
    - name: per-path
      match: {descriptors: [{key: path}]}
      identity: {sources: [{descriptor: {}}]}
      algorithm: SlidingWindowCounter
      limits: [{requests: 1, period: 1m}]
    - name: health
      match: {descriptors: [{key: generic_key, value: health}]}
      exempt: true
  overrides:
    - {tenant: acme, rule: checkout, limits: [{requests: 6, period: 1m}]}
---
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: api, namespace: shop}
spec:
  selector: {matchLabels: {app: api}}
  upstreamPort: 8080
  rules: [{name: api, limits: [{requests: 60, period: 1m}]}]
`

// compiled admits and compiles checkout as the manager does, for the
// service and for the enforcers.
func compiled(t *testing.T) (service, sidecar *config.Config) {
	t.Helper()
	g := NewWithT(t)
	policies, err := policyfile.Parse([]byte(checkout))
	g.Expect(err).NotTo(HaveOccurred())
	res, err := compile.Service("shop", policies, compile.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Errors).To(BeEmpty())
	side, err := compile.Namespace("shop", policies, compile.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(side.Errors).To(BeEmpty())
	return res.Config, side.Config
}

func entries(kv ...string) []*ratelimitv3common.RateLimitDescriptor_Entry {
	var out []*ratelimitv3common.RateLimitDescriptor_Entry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &ratelimitv3common.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestCompiledPolicyMatchesDescriptors(t *testing.T) {
	g := NewWithT(t)
	service, sidecar := compiled(t)
	g.Expect(sidecar.Policies).To(HaveLen(1))
	g.Expect(sidecar.Policies[0].Name).To(Equal("api"), "the enforcers' configuration has no domain policy")
	g.Expect(service.Policies).To(HaveLen(1))
	g.Expect(service.Policies[0].Domain).To(Equal("edge"), "the service's configuration has the domain policy only")

	tab, err := rls.NewTable(service)
	g.Expect(err).NotTo(HaveOccurred())
	ruleOf := func(kv ...string) string {
		if r := tab.Match("edge", entries(kv...)); r != nil {
			return r.Name
		}
		return ""
	}
	g.Expect(ruleOf("generic_key", "checkout", "user_id", "u1", "plan", "gold")).To(Equal("checkout"))
	g.Expect(ruleOf("generic_key", "checkout", "user_id", "u1")).To(BeEmpty(), "a descriptor that ends above a rule is admitted")
	g.Expect(ruleOf("path", "/a.pdf")).To(Equal("pdf"), "a wildcard value before a key alone")
	g.Expect(ruleOf("path", "/a.html")).To(Equal("per-path"))
	g.Expect(ruleOf("generic_key", "health")).To(Equal("health"))
	g.Expect(tab.Match("other", entries("generic_key", "checkout"))).To(BeNil(), "another domain is not this policy's")

	tenant := func(kv ...string) limiter.Tenant {
		e := entries(kv...)
		return tab.Match("edge", e).Tenant(e)
	}
	g.Expect(tenant("generic_key", "checkout", "user_id", "u1", "plan", "gold")).
		To(Equal(tenant("generic_key", "checkout", "user_id", "u1", "plan", "free")), "identity descriptor user_id: the user is the tenant, whatever the plan")
	g.Expect(tenant("generic_key", "checkout", "user_id", "u1", "plan", "gold")).
		NotTo(Equal(tenant("generic_key", "checkout", "user_id", "u2", "plan", "gold")))
	g.Expect(tenant("path", "/a.pdf")).To(Equal(tenant("path", "/b.pdf")), "shared: one bucket")
	g.Expect(tenant("path", "/a.html")).NotTo(Equal(tenant("path", "/b.html")), "identity descriptor without a key: each descriptor counts apart")
}

func TestCompiledPolicyDecidesByTierAndOverride(t *testing.T) {
	g := NewWithT(t)
	service, _ := compiled(t)
	client, err := limiter.NewClient(redisServer.URL(), limiter.ClientOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	r, err := limiter.NewRedis(client)
	g.Expect(err).NotTo(HaveOccurred())
	svc := rls.NewService(limiter.NewGuard(r), r, nil)
	g.Expect(svc.Apply(context.Background(), service)).To(Succeed())

	// admitted counts the calls of one descriptor admitted out of 10, and
	// reports the limit the last answer named.
	admitted := func(kv ...string) (n int, limit uint32) {
		for range 10 {
			resp, err := svc.ShouldRateLimit(context.Background(), &ratelimitv3.RateLimitRequest{Domain: "edge",
				Descriptors: []*ratelimitv3common.RateLimitDescriptor{{Entries: entries(kv...)}}})
			g.Expect(err).NotTo(HaveOccurred())
			if resp.OverallCode == ratelimitv3.RateLimitResponse_OK {
				n++
			}
			if st := resp.Statuses[0]; st.CurrentLimit != nil {
				limit = st.CurrentLimit.RequestsPerUnit
			}
		}
		return n, limit
	}
	cases := []struct {
		name   string
		kv     []string
		admits int
	}{
		{"the default tier", []string{"generic_key", "checkout", "user_id", "u1", "plan", "free"}, 2},
		{"a tier no limit names is the default", []string{"generic_key", "checkout", "user_id", "u2", "plan", "bronze"}, 2},
		{"a named tier", []string{"generic_key", "checkout", "user_id", "u3", "plan", "gold"}, 4},
		{"an override, whatever the tier", []string{"generic_key", "checkout", "user_id", "acme", "plan", "free"}, 6},
		{"shared", []string{"path", "/a.pdf"}, 1},
	}
	for _, tc := range cases {
		n, limit := admitted(tc.kv...)
		g.Expect(n).To(Equal(tc.admits), tc.name)
		g.Expect(limit).To(BeEquivalentTo(tc.admits), "%s: the answer names the limit it applied", tc.name)
	}
	n, _ := admitted("path", "/b.pdf")
	g.Expect(n).To(BeZero(), "the PDFs share one bucket")
	n, _ = admitted("generic_key", "health")
	g.Expect(n).To(Equal(10), "exempt")
}
