package enforcer

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/internal/orders"
)

// TestHTTPVersionsOnOnePort sends HTTP/1.1 and cleartext HTTP/2 (prior
// knowledge) requests to the same enforcer port, in front of an HTTP/1.1
// and an H2C application: each client is answered in its own version, the
// application receives its own version, body and trailers intact, and the
// limiter counts both clients alike.
func TestHTTPVersionsOnOnePort(t *testing.T) {
	clients := map[string]*http.Client{"HTTP/1.1": client, "HTTP/2.0": h2cClient()}
	for _, tc := range []struct {
		upstream, appSees string
	}{
		{"HTTP1", "HTTP/1.1"},
		{"H2C", "HTTP/2.0"},
	} {
		t.Run(tc.upstream, func(t *testing.T) {
			g := NewWithT(t)
			e := start(t, setup{upstream: protoApp(t, tc.upstream), config: grpcPolicy(namespace(t), tc.upstream, "Open", "1s",
				tenantRule("all", `[{"prefix": "/"}]`, 100))})
			remaining := 100
			for _, proto := range []string{"HTTP/1.1", "HTTP/2.0", "HTTP/1.1", "HTTP/2.0"} {
				req, err := http.NewRequest(http.MethodPost, e.url+"/v1/orders", strings.NewReader("book"))
				g.Expect(err).NotTo(HaveOccurred())
				req.Header.Set("X-Tenant-ID", "acme")
				resp, err := clients[proto].Do(req)
				g.Expect(err).NotTo(HaveOccurred(), "%s client", proto)
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				g.Expect(err).NotTo(HaveOccurred())
				remaining--
				g.Expect(resp.StatusCode).To(Equal(200), "%s client: %s", proto, body)
				g.Expect(resp.Proto).To(Equal(proto), "answered in the client's version")
				g.Expect(string(body)).To(Equal(tc.appSees+" POST /v1/orders book"), "%s client", proto)
				g.Expect(resp.Trailer.Get("X-App-Trailer")).To(Equal("done"), "%s client: trailers pass", proto)
				g.Expect(resp.Header.Get("X-RateLimit-Remaining")).To(Equal(fmt.Sprint(remaining)), "%s client: one budget", proto)
			}
			// A refusal in HTTP/2 to a client that is not gRPC stays a 429.
			e2 := start(t, setup{upstream: protoApp(t, tc.upstream), config: grpcPolicy(namespace(t)+"-b", tc.upstream, "Open", "1s",
				tenantRule("all", `[{"prefix": "/"}]`, 1))})
			for _, want := range []int{200, 429} {
				req, err := http.NewRequest(http.MethodGet, e2.url+"/v1/orders", nil)
				g.Expect(err).NotTo(HaveOccurred())
				resp, err := clients["HTTP/2.0"].Do(req)
				g.Expect(err).NotTo(HaveOccurred())
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				g.Expect(resp.StatusCode).To(Equal(want))
			}
		})
	}
}

// grpcPolicyFile is a RateLimitPolicy for the Orders service as a user
// writes it: upstreamProtocol H2C and rules matching gRPC methods.
const grpcPolicyFile = `  upstreamProtocol: H2C
  identity: {sources: [{header: {name: X-Tenant-ID}}]}
  rules:
    - name: create
      match: {grpc: [{service: shop.v1.Orders, method: Create}]}
      algorithm: FixedWindow
      limits: [{requests: 1, period: 1h}]
    - name: service
      match: {grpc: [{service: shop.v1.Orders}]}
      algorithm: FixedWindow
      limits: [{requests: 3, period: 1h}]`

// TestGRPCMatch limits one method and a whole service with match.grpc in a
// policy file: Create is refused by its own rule after one call, the other
// methods by the service's rule after three calls of the service in all,
// and calls of other services (health) are not limited.
func TestGRPCMatch(t *testing.T) {
	g := NewWithT(t)
	app, _ := ordersApp(t, nil)
	e := start(t, setup{policies: policy("orders", grpcPolicyFile), upstream: app})
	cc := dialGRPC(t, e.url)
	c := orders.NewClient(cc)
	ctx, cancel := within(10 * time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant-id", "acme")

	refusedBy := func(err error) string {
		if st, _ := grpcstatus.FromError(err); st.Code() != codes.ResourceExhausted {
			return fmt.Sprintf("not refused: %v", err)
		}
		v := refusalOf(err).violations
		if len(v) != 1 {
			return fmt.Sprintf("violations %v", v)
		}
		return v[0].GetSubject()
	}
	watch := func() error {
		s, err := c.Watch(ctx, 1)
		if err != nil {
			return err
		}
		for {
			if _, err := s.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}

	_, err := c.Create(ctx, "book")
	g.Expect(err).NotTo(HaveOccurred(), "Create: 1 of 1, service: 1 of 3")
	_, err = c.Create(ctx, "book")
	g.Expect(refusedBy(err)).To(ContainSubstring("create"), "the method's rule refuses the second Create")
	g.Expect(watch()).To(Succeed(), "service: 2 of 3 (the refused Create took nothing)")
	g.Expect(watch()).To(Succeed(), "service: 3 of 3")
	err = watch()
	g.Expect(refusedBy(err)).To(ContainSubstring("service"), "the service's rule refuses the fourth call")

	for range 5 {
		_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		g.Expect(err).NotTo(HaveOccurred(), "other services match no rule")
	}
}
