package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// rlsTarget calls envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit,
// as Envoy's rate limit filter does, on any rate limit service (Sluice's or
// envoyproxy/ratelimit): one request per call, its descriptors given on the
// command line with {tenant} rotating. It shares grpcTarget's loopback check
// and connections.
type rlsTarget struct {
	*grpcTarget
	// requests are one prepared request per tenant.
	requests []*ratelimitv3.RateLimitRequest
}

// newRLSTarget prepares a request per tenant: each descriptor flag is one
// descriptor of the request, "key=value,key=value" its entries.
func newRLSTarget(ctx context.Context, rawURL, domain string, descriptors []string, tenants, connections int, o *loadOptions) (*rlsTarget, error) {
	if domain == "" {
		return nil, fmt.Errorf("--rls needs a domain")
	}
	if len(descriptors) == 0 {
		return nil, fmt.Errorf("--rls needs at least one --descriptor key=value[,key=value...]")
	}
	gt, err := newGRPCTarget(ctx, rawURL, nil, tenants, connections, o.plan.Timeout)
	if err != nil {
		return nil, err
	}
	t := &rlsTarget{grpcTarget: gt}
	for n := range tenants {
		req := &ratelimitv3.RateLimitRequest{Domain: domain}
		for _, d := range descriptors {
			desc, err := parseDescriptor(d, strconv.Itoa(n))
			if err != nil {
				gt.close()
				return nil, err
			}
			req.Descriptors = append(req.Descriptors, desc)
		}
		t.requests = append(t.requests, req)
	}
	return t, nil
}

// parseDescriptor reads "key=value,key=value", the tenant placeholder in a
// value replaced by tenant.
func parseDescriptor(s, tenant string) (*ratelimitcommon.RateLimitDescriptor, error) {
	d := &ratelimitcommon.RateLimitDescriptor{}
	for entry := range strings.SplitSeq(s, ",") {
		key, value, ok := strings.Cut(entry, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("descriptor %q: want key=value[,key=value...]", s)
		}
		d.Entries = append(d.Entries, &ratelimitcommon.RateLimitDescriptor_Entry{
			Key: key, Value: strings.ReplaceAll(value, tenantPlaceholder, tenant),
		})
	}
	return d, nil
}

func (t *rlsTarget) caller() caller {
	cc := t.conns[(t.next.Add(1)-1)%uint64(len(t.conns))]
	return &rlsCaller{t: t, client: ratelimitv3.NewRateLimitServiceClient(cc)}
}

// rlsCaller makes one call at a time.
type rlsCaller struct {
	t      *rlsTarget
	client ratelimitv3.RateLimitServiceClient
}

// call reports OK as 200 and OVER_LIMIT as 429, so RLS runs share the
// report of HTTP and gRPC runs; any other code or a failed call is an error.
func (c *rlsCaller) call(i uint64) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.t.timeout)
	defer cancel()
	resp, err := c.client.ShouldRateLimit(ctx, c.t.requests[i%uint64(len(c.t.requests))], grpc.WaitForReady(false))
	if err != nil {
		return grpcHTTPStatus(err)
	}
	switch resp.GetOverallCode() {
	case ratelimitv3.RateLimitResponse_OK:
		return 200, nil
	case ratelimitv3.RateLimitResponse_OVER_LIMIT:
		return 429, nil
	}
	return 0, fmt.Errorf("overall code %s", resp.GetOverallCode())
}

func (c *rlsCaller) close() {}
