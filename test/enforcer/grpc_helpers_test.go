package enforcer

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/internal/example/orders"
)

// ordersApp runs the gRPC sample application (shop.v1.Orders, health,
// reflection) on a loopback port and returns its base URL for --upstream
// and the service, whose finished calls go to calls when it is not nil.
func ordersApp(t testing.TB, calls chan<- orders.Call) (string, *orders.Service) {
	t.Helper()
	svc := &orders.Service{Pod: "orders-0"}
	if calls != nil {
		svc.Observe = func(c orders.Call) {
			select {
			case calls <- c:
			default: // a test that stopped reading
			}
		}
	}
	gs, err := orders.NewServer(svc)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return "http://" + ln.Addr().String(), svc
}

// dialGRPC is a grpc-go client connection to base (http://host:port), in
// cleartext HTTP/2 with prior knowledge as gRPC clients in a cluster speak.
func dialGRPC(t testing.TB, base string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(strings.TrimPrefix(base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// protoApp is an HTTP application speaking protocol ("HTTP1" or "H2C")
// that answers "<proto> <method> <path> <body>" and sets trailer
// X-App-Trailer, so a test sees which protocol the enforcer used towards it.
func protoApp(t testing.TB, protocol string) string {
	return serveApp(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "X-App-Trailer")
		fmt.Fprintf(w, "%s %s %s %s", r.Proto, r.Method, r.URL.Path, body)
		w.Header().Set("X-App-Trailer", "done")
	}), protocol)
}

// serveApp serves h on 127.0.0.1 in the protocols named ("HTTP1",
// "H2C"), both when none is, and returns its base URL.
func serveApp(t testing.TB, h http.Handler, protocols ...string) string {
	t.Helper()
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: h, Protocols: new(http.Protocols)}
	if len(protocols) == 0 {
		protocols = []string{"HTTP1", "H2C"}
	}
	for _, p := range protocols {
		if p == "H2C" {
			srv.Protocols.SetUnencryptedHTTP2(true)
		} else {
			srv.Protocols.SetHTTP1(true)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// h2cClient speaks cleartext HTTP/2 with prior knowledge only.
func h2cClient() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// grpcPolicy is one compiled policy ("orders", Enforce, every header kind)
// with the given upstream protocol, failure mode and rules (JSON), in
// namespace ns. The compiled form is the data plane's own input, so these
// tests depend on nothing but the enforcer.
func grpcPolicy(ns, protocol, failureMode, timeout, rules string) string {
	return fmt.Sprintf(`{"schema": "sluice.dev/enforcer-config/v1", "namespace": %q, "policies": [{
  "name": "orders", "uid": "0c1d", "generation": 1, "selector": {"matchLabels": {"app": "api"}},
  "replicas": 1, "upstreamPort": 50051, "upstreamProtocol": %q, "mode": "Enforce", "failureMode": %q,
  "timeout": %q, "responseHeaders": "Both", "salt": "0c1d", "rules": [%s]}]}`, ns, protocol, failureMode, timeout, rules)
}

// tenantRule is a FixedWindow rule of limit calls an hour per x-tenant-id
// over the paths (JSON list of path matches).
func tenantRule(name, paths string, limit int) string {
	return fmt.Sprintf(`{"name": %q, "match": {"paths": %s}, "algorithm": "FixedWindow", "cost": 1,
  "identity": {"sources": [{"header": {"name": "X-Tenant-ID"}}]}, "limits": [{"requests": %d, "period": "1h"}]}`, name, paths, limit)
}

// grpcRefusal is what a gRPC client reads from a refused call's status.
type grpcRefusal struct {
	retryDelay time.Duration
	hasRetry   bool
	violations []*errdetails.QuotaFailure_Violation
	errorInfo  *errdetails.ErrorInfo
}

func refusalOf(err error) grpcRefusal {
	var r grpcRefusal
	st, _ := grpcstatus.FromError(err)
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			r.hasRetry = true
			r.retryDelay = d.GetRetryDelay().AsDuration()
		case *errdetails.QuotaFailure:
			r.violations = append(r.violations, d.GetViolations()...)
		case *errdetails.ErrorInfo:
			r.errorInfo = d
		}
	}
	return r
}

// within is ctx with a timeout for one call, so a hung call fails the test
// instead of hanging it.
func within(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
