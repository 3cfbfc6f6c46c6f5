package enforcer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/internal/example/orders"
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
			e := start(t, setup{upstream: protoApp(t, tc.upstream), config: grpcPolicy(namespace(t), tc.upstream, "Open", "1s",
				tenantRule("all", `[{"prefix": "/"}]`, 100))})
			remaining := 100
			for i, proto := range []string{"HTTP/1.1", "HTTP/2.0", "HTTP/1.1", "HTTP/2.0"} {
				remaining--
				// A subtest each, so that one combination failing still
				// shows how the others fare.
				t.Run(fmt.Sprintf("%d %s client", i, proto), func(t *testing.T) {
					g := NewWithT(t)
					req, err := http.NewRequest(http.MethodPost, e.url+"/v1/orders", strings.NewReader("book"))
					g.Expect(err).NotTo(HaveOccurred())
					req.Header.Set("X-Tenant-ID", "acme")
					resp, err := clients[proto].Do(req)
					g.Expect(err).NotTo(HaveOccurred())
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(resp.StatusCode).To(Equal(200), "%s", body)
					g.Expect(resp.Proto).To(Equal(proto), "answered in the client's version")
					g.Expect(string(body)).To(Equal(tc.appSees + " POST /v1/orders book"))
					g.Expect(resp.Header.Get("X-RateLimit-Remaining")).To(Equal(fmt.Sprint(remaining)), "one budget for both versions")
					g.Expect(resp.Trailer.Get("X-App-Trailer")).To(Equal("done"), "the application's trailers pass: header %v", resp.Header)
				})
			}
			g := NewWithT(t)
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

// TestH2CUpgradeAnsweredInHTTP1 asks for the HTTP/1.1 Upgrade: h2c
// handshake (curl --http2 on an http:// URL): the enforcer does not offer
// it, and answers the request itself over HTTP/1.1, decided like any other.
func TestH2CUpgradeAnsweredInHTTP1(t *testing.T) {
	g := NewWithT(t)
	e := start(t, setup{upstream: protoApp(t, "HTTP1"), config: grpcPolicy(namespace(t), "HTTP1", "Open", "1s",
		tenantRule("all", `[{"prefix": "/"}]`, 100))})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	g.Expect(conn.SetDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
	_, err = fmt.Fprint(conn, "GET /v1/orders HTTP/1.1\r\nHost: api.example.com\r\nX-Tenant-ID: acme\r\n"+
		"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(200), "no 101: %s", body)
	g.Expect(resp.Proto).To(Equal("HTTP/1.1"))
	g.Expect(string(body)).To(Equal("HTTP/1.1 GET /v1/orders "))
	g.Expect(resp.Header.Get("X-RateLimit-Remaining")).To(Equal("99"), "decided like any request")
}
