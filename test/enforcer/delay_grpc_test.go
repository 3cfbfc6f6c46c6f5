package enforcer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/internal/example/orders"
)

// TestDelayGRPCWaitsWithinItsDeadline: a delayed gRPC call waits for its
// slot; one whose deadline ends before its slot is refused at once with
// RESOURCE_EXHAUSTED instead of timing out, and gives its slot back.
func TestDelayGRPCWaitsWithinItsDeadline(t *testing.T) {
	g := NewWithT(t)
	app, svc := ordersApp(t, nil)
	rule := `{"name": "create", "match": {"paths": ` + createPath + `}, "algorithm": "TokenBucket", "cost": 1,
  "identity": {"sources": [{"header": {"name": "X-Tenant-ID"}}]}, "limits": [{"requests": 1, "period": "2s"}],
  "onLimit": {"delay": {"max": "5s", "maxQueued": 10}}}`
	e := start(t, setup{config: grpcPolicy(namespace(t), "H2C", "Open", "1s", rule), upstream: app})
	c := orders.NewClient(dialGRPC(t, e.url))
	tenant := metadata.AppendToOutgoingContext(context.Background(), "x-tenant-id", namespace(t))
	call := func(deadline time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(tenant, deadline)
		defer cancel()
		begin := time.Now()
		_, err := c.Create(ctx, "book")
		return time.Since(begin), err
	}

	_, err := call(5 * time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	took, err := call(5 * time.Second)
	g.Expect(err).NotTo(HaveOccurred(), "delayed, not refused")
	g.Expect(took).To(BeNumerically(">=", 1500*time.Millisecond), "it waited for the next unit")

	// the next unit is 2s away: more than this call's deadline
	took, err = call(700 * time.Millisecond)
	st, _ := grpcstatus.FromError(err)
	g.Expect(st.Code()).To(Equal(codes.ResourceExhausted), "refused, not left to time out: %v", err)
	g.Expect(st.Message()).To(ContainSubstring("beyond the call's deadline"))
	g.Expect(took).To(BeNumerically("<", 600*time.Millisecond))

	// its slot was given back: the next call waits for it, not the one after
	took, err = call(5 * time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(took).To(BeNumerically("<", 3*time.Second))
	g.Expect(svc.Served()).To(Equal(int64(3)), "the refused call never reached the application")
}

// TestDelayDebugTenantShowsReservations: /debug/tenant shows the units
// booked ahead in Redis and the tenant's requests waiting in this enforcer.
func TestDelayDebugTenantShowsReservations(t *testing.T) {
	g := NewWithT(t)
	debugAddr, _ := freeAddrs(t)
	e := start(t, setup{policies: delaySpec("GCRA", "{requests: 1, period: 2s}", "{max: 10s}"), args: []string{"--debug-listen", debugAddr}})
	tenantID := namespace(t) + "-debug"
	tenant := "X-Tenant-ID: " + tenantID
	g.Expect(get(t, e.url+"/v1/search", tenant).status).To(Equal(200))
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { get(t, e.url+"/v1/search", tenant) })
		time.Sleep(100 * time.Millisecond)
	}
	var usage struct {
		Remaining    int64 `json:"remaining"`
		Reservations *struct {
			Booked     int64      `json:"booked"`
			Until      *time.Time `json:"until"`
			Waiting    int        `json:"waiting"`
			LatestSlot *time.Time `json:"latestSlot"`
		} `json:"reservations"`
	}
	r := get(t, fmt.Sprintf("http://%s/debug/tenant?policy=search&rule=search&tenant=%s", debugAddr, url.QueryEscape(tenantID)))
	g.Expect(r.status).To(Equal(200), r.body)
	g.Expect(json.NewDecoder(strings.NewReader(r.body)).Decode(&usage)).To(Succeed())
	g.Expect(usage.Reservations).NotTo(BeNil(), r.body)
	g.Expect(usage.Reservations.Booked).To(Equal(int64(3)), r.body)
	g.Expect(usage.Reservations.Waiting).To(Equal(3), r.body)
	g.Expect(usage.Reservations.Until).NotTo(BeNil())
	g.Expect(*usage.Reservations.Until).To(BeTemporally("~", time.Now().Add(6*time.Second-300*time.Millisecond), time.Second))
	g.Expect(*usage.Reservations.LatestSlot).To(BeTemporally("~", *usage.Reservations.Until, 10*time.Millisecond))
	wg.Wait()
}
