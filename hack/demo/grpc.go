package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/internal/example/orders"
	"github.com/sluice-dev/sluice/internal/testing/stack"
)

// grpcApp is the sample application the orders policy selects.
const grpcApp = "orders"

// grpcCall is one answered call, kept for display.
type grpcCall struct {
	pod      string
	err      error
	metadata metadata.MD
}

// grpcCalls drives gRPC calls through the orders enforcers: a tenant
// creating orders until its limit, and what its client reads when refused.
func (d *demo) grpcCalls(ctx context.Context) error {
	section("6. gRPC through the enforcer")
	eps := d.apps[grpcApp]
	fmt.Printf("   %s run shop.v1.Orders in cleartext HTTP/2 (hack/orders); policy orders has\n", podNames(eps))
	fmt.Println("   upstreamProtocol H2C and matches calls with match.grpc: 10 Create calls a minute per tenant.")
	fmt.Println()
	clients := make([]*orders.Client, len(eps))
	for i, ep := range eps {
		cc, err := grpc.NewClient(strings.TrimPrefix(ep.HTTP, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer cc.Close()
		clients[i] = orders.NewClient(cc)
		// The application starts beside the enforcer: wait until it serves.
		health := healthpb.NewHealthClient(cc)
		if err := waitFor(ctx, "shop.v1.Orders on "+ep.Pod, func() (bool, error) {
			resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: orders.ServiceName})
			return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING, err
		}); err != nil {
			return err
		}
	}
	fmt.Printf("   grpc.health.v1.Health/Check through each enforcer: SERVING (rule health is exempt)\n\n")

	const calls = 15
	tenant := metadata.AppendToOutgoingContext(ctx, "x-tenant-id", "acme")
	byCode := map[codes.Code]int{}
	first := map[codes.Code]*grpcCall{}
	for i := range calls {
		var header, trailer metadata.MD
		callCtx, cancel := context.WithTimeout(tenant, 5*time.Second)
		_, err := clients[i%len(clients)].Create(callCtx, "book", grpc.Header(&header), grpc.Trailer(&trailer))
		cancel()
		code := status.Code(err)
		byCode[code]++
		if first[code] == nil {
			first[code] = &grpcCall{pod: eps[i%len(eps)].Pod, err: err, metadata: metadata.Join(header, trailer)}
		}
	}
	rows := [][]string{{"SCENARIO", "POLICY", "CALLS", "OK", "RESOURCE_EXHAUSTED"}}
	other := ""
	for code, n := range byCode {
		if code != codes.OK && code != codes.ResourceExhausted {
			other += fmt.Sprintf(" (%d × %s)", n, code)
		}
	}
	rows = append(rows, []string{"acme, Create (10/min)", "orders", fmt.Sprint(calls), fmt.Sprint(byCode[codes.OK]), fmt.Sprint(byCode[codes.ResourceExhausted]) + other})
	table(rows)
	showCall("An allowed call", first[codes.OK])
	showCall("A refused call, as status.FromError reads it", first[codes.ResourceExhausted])
	return nil
}

// shownMetadata are the metadata keys a call is shown with.
var shownMetadata = []string{"ratelimit", "ratelimit-policy", "retry-after", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", orders.PodHeader}

func showCall(title string, c *grpcCall) {
	if c == nil {
		return
	}
	fmt.Printf("\n   %s (from %s):\n", title, c.pod)
	st := status.Convert(c.err)
	fmt.Printf("     code %s", st.Code())
	if st.Message() != "" {
		fmt.Printf(": %s", st.Message())
	}
	fmt.Println()
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			fmt.Printf("     RetryInfo: retry_delay %s\n", d.GetRetryDelay().AsDuration())
		case *errdetails.QuotaFailure:
			for _, v := range d.GetViolations() {
				fmt.Printf("     QuotaFailure: subject %q, description %q\n", v.GetSubject(), v.GetDescription())
			}
		}
	}
	for _, k := range shownMetadata {
		if v := c.metadata.Get(k); len(v) > 0 {
			fmt.Printf("     %s: %s\n", k, strings.Join(v, ", "))
		}
	}
}

func podNames(eps []stack.Endpoint) string {
	var names []string
	for _, ep := range eps {
		names = append(names, ep.Pod)
	}
	slices.Sort(names)
	return strings.Join(names, " and ")
}
