package engine

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// guardOn is a Guard on srv, closed when the test ends.
func guardOn(t *testing.T, srv *redistest.Server) *limiter.Guard {
	t.Helper()
	client, err := limiter.NewClient(srv.URL(), limiter.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := limiter.NewRedis(client)
	if err != nil {
		t.Fatal(err)
	}
	g := limiter.NewGuard(r)
	t.Cleanup(func() { g.Close(); _ = r.Close(); _ = client.Close() })
	return g
}

// fixedWindow is a request of rule (n requests per hour, decided in
// Redis) for tenant ann.
func fixedWindow(t *testing.T, rule string, n int64) limiter.Request {
	t.Helper()
	cr := &config.Rule{Name: rule, Algorithm: config.FixedWindow, Cost: 1, Leasing: config.LeasingOff}
	r, err := limiter.NewRule(limiter.Bucket{Namespace: "shop", Policy: "api", Rule: rule}, cr,
		[]limiter.Window{{Requests: n, Period: time.Hour}}, limiter.FailurePolicy{Mode: config.FailOpen})
	if err != nil {
		t.Fatal(err)
	}
	return r.Request(limiter.HashTenant("salt", "ann"))
}

// A request whose checks live on two Redis servers is decided in one round
// trip per server, and refused by one of them it takes nothing from the
// other: the next request finds the room the refused one was admitted to.
func TestARefusedRequestTakesNothingOnAnyBackend(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a, b := guardOn(t, redistest.Start(t)), guardOn(t, redistest.Start(t))
	wide, narrow := fixedWindow(t, "wide", 3), fixedWindow(t, "narrow", 1)

	var batch Batch
	decide := func() map[*limiter.Guard]int {
		trips := map[*limiter.Guard]int{}
		batch.Reset()
		batch.Add(a, wide)
		batch.Add(b, narrow)
		batch.Decide(ctx, func(g *limiter.Guard, _ time.Duration) { trips[g]++ })
		return trips
	}

	g.Expect(decide()).To(Equal(map[*limiter.Guard]int{a: 1, b: 1}), "one round trip per backend")
	g.Expect(batch.Admissions[0].Decision.Allowed).To(BeTrue())
	g.Expect(batch.Admissions[1].Decision.Allowed).To(BeTrue())
	batch.Admit()
	batch.Release()

	decide()
	g.Expect(batch.Admissions[0].Decision.Allowed).To(BeTrue(), "the wide window has room")
	g.Expect(batch.Admissions[1].Decision.Allowed).To(BeFalse(), "the narrow one is used up")
	g.Expect(batch.Refuse(ctx)).To(BeZero())
	g.Expect(batch.GivenBack(0)).To(BeTrue())
	g.Expect(batch.GivenBack(1)).To(BeFalse(), "a refusal took nothing")
	g.Expect(batch.Admissions[0].Decision.Remaining).To(Equal(int64(2)), "the refusal reports what the next request finds")

	batch.Reset()
	batch.Add(a, wide)
	batch.Decide(ctx, nil)
	g.Expect(batch.Admissions[0].Decision.Remaining).To(Equal(int64(1)), "the refused request counted nowhere")
}
