package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/internal/example/orders"
)

// grpcItem is what every benchmark call orders.
const grpcItem = "bench"

// grpcTarget calls shop.v1.Orders/Create, the unary method of the gRPC
// sample application (hack/orders), in cleartext HTTP/2 with prior
// knowledge, as gRPC clients in a cluster do. The callers share a few
// client connections, each carrying many calls at once.
type grpcTarget struct {
	url   string
	conns []*grpc.ClientConn
	// tenants are contexts with each tenant's outgoing metadata.
	tenants []context.Context
	timeout time.Duration
	next    atomic.Uint64
}

// newGRPCTarget checks rawURL (http://HOST:PORT on loopback) and opens
// connections; headers become metadata, {tenant} rotating as for HTTP.
func newGRPCTarget(ctx context.Context, rawURL string, headers []string, tenants, connections int, timeout time.Duration) (*grpcTarget, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("target URL: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("target URL %q: want http://HOST:PORT for gRPC (cleartext HTTP/2); the method is %s", rawURL, orders.CreateMethod)
	}
	if tenants < 1 {
		return nil, fmt.Errorf("--tenants must be at least 1, got %d", tenants)
	}
	if connections < 1 || connections > 1000 {
		return nil, fmt.Errorf("--connections must be between 1 and 1000, got %d", connections)
	}
	addr, err := loopbackAddr(ctx, u)
	if err != nil {
		return nil, err
	}
	t := &grpcTarget{url: u.String(), timeout: timeout}
	for n := range tenants {
		md, err := grpcMetadata(headers, strconv.Itoa(n))
		if err != nil {
			return nil, err
		}
		t.tenants = append(t.tenants, metadata.NewOutgoingContext(ctx, md))
	}
	for range connections {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.close()
			return nil, err
		}
		t.conns = append(t.conns, cc)
	}
	return t, nil
}

// grpcMetadata is the "Name: value" headers as metadata, the tenant
// placeholder replaced by tenant.
func grpcMetadata(headers []string, tenant string) (metadata.MD, error) {
	md := metadata.MD{}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		name, value = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(value)
		if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") || strings.ContainsAny(value, "\r\n") {
			return nil, fmt.Errorf("header %q: want \"Name: value\"", h)
		}
		if strings.HasPrefix(name, "grpc-") || name == "content-type" || name == "te" {
			return nil, fmt.Errorf("header %q is set by gRPC", h)
		}
		md.Append(name, strings.ReplaceAll(value, tenantPlaceholder, tenant))
	}
	return md, nil
}

// caller is a caller on the target's connections, in turn.
func (t *grpcTarget) caller() caller {
	cc := t.conns[(t.next.Add(1)-1)%uint64(len(t.conns))]
	return &grpcCaller{t: t, client: orders.NewClient(cc)}
}

func (t *grpcTarget) close() {
	for _, cc := range t.conns {
		_ = cc.Close()
	}
}

// grpcCaller makes one call at a time.
type grpcCaller struct {
	t      *grpcTarget
	client *orders.Client
}

func (c *grpcCaller) call(i uint64) (int, error) {
	ctx, cancel := context.WithTimeout(c.t.tenants[i%uint64(len(c.t.tenants))], c.t.timeout)
	defer cancel()
	_, err := c.client.Create(ctx, grpcItem)
	return grpcHTTPStatus(err)
}

// The connections are the target's, closed with it.
func (c *grpcCaller) close() {}

// grpcHTTPStatus reports a call's outcome as the HTTP status of the same
// answer, so gRPC and HTTP runs share one report: OK is 200, a rate limit
// refusal (RESOURCE_EXHAUSTED) 429, a fail-closed one (UNAVAILABLE with
// RetryInfo, from the enforcer) 503. Any other status, a transport failure
// or a timeout is an error.
func grpcHTTPStatus(err error) (int, error) {
	if err == nil {
		return 200, nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return 0, err
	}
	switch st.Code() {
	case codes.ResourceExhausted:
		return 429, nil
	case codes.Unavailable:
		for _, d := range st.Details() {
			if _, retry := d.(*errdetails.RetryInfo); retry {
				return 503, nil
			}
		}
	}
	return 0, errors.New(st.Code().String() + ": " + st.Message())
}
