package limiter

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// concurrencyRequest is a Concurrency rule of limit slots for t's tenant.
func concurrencyRequest(t *testing.T, limit, cost int64, mode config.FailureMode) Request {
	return mustCheck(t, Request{Bucket: bucketFor(t), Algorithm: Concurrency, Cost: cost,
		Windows: []Window{ConcurrencyWindow(limit)},
		Failure: FailurePolicy{Mode: mode, Timeout: 2 * time.Second, Replicas: 2}})
}

// take decides req on g and holds what it took.
func take(t *testing.T, g *Guard, req Request) (Decision, Admission) {
	t.Helper()
	d, err := g.Allow(context.Background(), req)
	if err != nil && !d.Degraded {
		t.Fatal(err)
	}
	return d, g.hold(req, d)
}

func TestConcurrencyHoldsAtMostTheLimitAcrossGuardsAndFreesOnRelease(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			a, b := newGuard(t, url), newGuard(t, url)
			req := concurrencyRequest(t, 3, 1, config.FailClosed)
			var held []Admission
			for i, guard := range []*Guard{a, b, a} {
				d, s := take(t, guard, req)
				g.Expect(d.Allowed).To(BeTrue(), "slot %d", i)
				g.Expect(d.Remaining).To(Equal(int64(2 - i)))
				held = append(held, s)
			}
			d, s := take(t, b, req)
			g.Expect(d.Allowed).To(BeFalse(), "a fourth request in flight")
			g.Expect(s.holds()).To(BeFalse())
			g.Expect(a.SlotCounts(req.Bucket.Policy).InUse.Load()).To(Equal(int64(2)))

			held[0].Release()
			held[0].Release() // a second Free gives nothing back
			g.Eventually(func() bool {
				d, s := take(t, b, req)
				if d.Allowed {
					held[0] = s
				}
				return d.Allowed
			}, 10*time.Second, 20*time.Millisecond).Should(BeTrue(), "the slot given back is free again")
			d, _ = take(t, a, req)
			g.Expect(d.Allowed).To(BeFalse(), "the double Free gave back one slot only")
		})
	}
}

func TestConcurrencyCostTakesThatManySlots(t *testing.T) {
	g := NewWithT(t)
	guard := newGuard(t, standalone.URL())
	heavy := concurrencyRequest(t, 4, 3, config.FailClosed)
	light := concurrencyRequest(t, 4, 1, config.FailClosed)
	d, _ := take(t, guard, heavy)
	g.Expect(d.Allowed).To(BeTrue())
	d, _ = take(t, guard, heavy)
	g.Expect(d.Allowed).To(BeFalse(), "3 + 3 slots exceed 4")
	d, _ = take(t, guard, light)
	g.Expect(d.Allowed).To(BeTrue(), "3 + 1 fit")
}

func TestConcurrencySlotsOfAnEnforcerThatStopsRenewingExpire(t *testing.T) {
	g := NewWithT(t)
	guard := newGuard(t, standalone.URL())
	// an expiry of 500ms stands for SlotExpiry; no Hold: nothing renews,
	// as for an enforcer killed while its requests ran
	req := mustCheck(t, Request{Bucket: bucketFor(t), Algorithm: Concurrency, Cost: 1,
		Windows: []Window{{Requests: 1, Period: 500 * time.Millisecond}}, Failure: FailurePolicy{Mode: config.FailClosed, Timeout: 2 * time.Second}})
	d, err := guard.Allow(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Allowed).To(BeTrue())
	d, _ = guard.Allow(context.Background(), req)
	g.Expect(d.Allowed).To(BeFalse())
	g.Eventually(func() bool {
		d, _ := guard.Allow(context.Background(), req)
		return d.Allowed
	}, 10*time.Second, 50*time.Millisecond).Should(BeTrue(), "the dead holder's slot expired")
}

func TestConcurrencyRenewalKeepsHeldSlotsPastTheirExpiry(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for more than one expiry")
	}
	g := NewWithT(t)
	guard := newGuard(t, standalone.URL())
	req := concurrencyRequest(t, 1, 1, config.FailClosed)
	d, s := take(t, guard, req)
	g.Expect(d.Allowed).To(BeTrue())
	g.Consistently(func() bool {
		d, _ := guard.Allow(context.Background(), req)
		return d.Allowed
	}, SlotExpiry+2*SlotRenewal, time.Second).Should(BeFalse(), "the held slot stays counted while renewed")
	holders, err := guard.SlotHolders(context.Background(), &req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(holders).To(ConsistOf(HaveField("Enforcer", EnforcerID())))
	s.Release()
	g.Eventually(func() bool {
		d, _ := guard.Allow(context.Background(), req)
		return d.Allowed
	}, 10*time.Second, 50*time.Millisecond).Should(BeTrue())
}

func TestConcurrencySlotsLostWithRedisDataAreNotGivenBackTwice(t *testing.T) {
	g := NewWithT(t)
	server := redistest.Start(t)
	guard := newGuard(t, server.URL())
	req := concurrencyRequest(t, 2, 1, config.FailClosed)
	_, old := take(t, guard, req)
	g.Expect(old.holds()).To(BeTrue())
	// Redis loses its data (a restart without persistence)
	g.Expect(server.Client().FlushAll(context.Background()).Err()).To(Succeed())
	time.Sleep(2 * time.Millisecond) // a new generation is a later microsecond
	_, first := take(t, guard, req)
	_, second := take(t, guard, req)
	g.Expect(first.holds() && second.holds()).To(BeTrue(), "the lost slot no longer counts")
	guard.slots.renew(guard.redis) // the enforcer learns its slots' generation
	old.Release()
	// the old slot's give-back must not free one of the two new ones, nor
	// be taken over by a new request
	g.Consistently(func() bool {
		d, _ := guard.Allow(context.Background(), req)
		return d.Allowed
	}, 1500*time.Millisecond, 100*time.Millisecond).Should(BeFalse())
	first.Release()
	second.Release()
}

func TestConcurrencyLocalFallbackHoldsItsShareAndGivesBackLocally(t *testing.T) {
	g := NewWithT(t)
	server := redistest.Start(t)
	guard := newGuard(t, server.URL())
	// 5 slots between 2 replicas: 2 here while Redis is away
	req := concurrencyRequest(t, 5, 1, config.FailLocal)
	server.Stop()
	var held []Admission
	for i := range 2 {
		d, s := take(t, guard, req)
		g.Expect(d.Allowed).To(BeTrue(), "local slot %d", i)
		g.Expect(d.Degraded).To(BeTrue())
		held = append(held, s)
	}
	d, _ := take(t, guard, req)
	g.Expect(d.Allowed).To(BeFalse(), "a third request exceeds this replica's share")
	holders, _ := guard.SlotHolders(context.Background(), &req)
	g.Expect(holders).To(ContainElement(And(HaveField("Local", true), HaveField("Slots", int64(2)))))

	g.Expect(server.Restart()).To(Succeed())
	// Redis never counted the local slots: all 5 are free there, and
	// giving the local ones back touches only the local count
	for _, s := range held {
		s.Release()
	}
	g.Eventually(func() bool {
		d, _ := guard.Allow(context.Background(), req)
		return d.Allowed && !d.Degraded
	}, 15*time.Second, 100*time.Millisecond).Should(BeTrue())
	var taken int
	for range 10 {
		if d, _ := take(t, guard, req); d.Allowed && !d.Degraded {
			taken++
		}
	}
	g.Expect(taken).To(Equal(4), "Redis holds 5 slots: the probe's and 4 more")
}

func TestConcurrencyRefundGivesBackASlotTakenForARefusedRequest(t *testing.T) {
	g := NewWithT(t)
	guard := newGuard(t, standalone.URL())
	req := concurrencyRequest(t, 1, 1, config.FailClosed)
	d, err := guard.Allow(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Allowed).To(BeTrue())
	g.Expect(guard.refund(context.Background(), []Request{req}, []time.Time{d.CountedAt})).To(Succeed())
	d, _ = guard.Allow(context.Background(), req)
	g.Expect(d.Allowed).To(BeTrue(), "the refunded slot is free")
}

func TestConcurrencySlotWaitFollowsHoldingTimes(t *testing.T) {
	g := NewWithT(t)
	guard := newGuard(t, standalone.URL())
	req := concurrencyRequest(t, 10, 1, config.FailClosed)
	g.Expect(guard.SlotWait(&req)).To(Equal(time.Second), "at least 1 s before any request ended")
	for range 20 {
		guard.slots.observe(&req, 2500*time.Millisecond)
	}
	g.Expect(guard.SlotWait(&req)).To(Equal(3*time.Second), "rounded up to whole seconds")
}

func TestConcurrencyAwaitSlotTakesOverGivenBackSlotsInArrivalOrder(t *testing.T) {
	g := NewWithT(t)
	guard := newGuard(t, standalone.URL())
	rule, err := newRule(bucketFor(t), Concurrency, []Window{ConcurrencyWindow(1)}, 1,
		FailurePolicy{Mode: config.FailClosed, Timeout: 2 * time.Second}, withDelay(5*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	req := rule.Request(bucketFor(t).Tenant)
	g.Expect(req.f.slotWait).To(Equal(5 * time.Second))
	_, first := take(t, guard, req)
	g.Expect(first.holds()).To(BeTrue())

	got := make(chan string, 2)
	slots := make(chan Admission, 2)
	for _, name := range []string{"b", "c"} {
		go func() {
			s, ok, err := guard.awaitSlot(context.Background(), req)
			if ok {
				slots <- s
			}
			got <- fmt.Sprint(name, ok, err)
		}()
		g.Eventually(func() int { return guard.SlotsWaiting(&req) }, 5*time.Second).Should(BeNumerically(">=", 1))
		time.Sleep(20 * time.Millisecond)
	}
	g.Eventually(func() int { return guard.SlotsWaiting(&req) }, 5*time.Second).Should(Equal(2))
	first.Release()
	g.Expect(<-got).To(Equal("btrue <nil>"))
	s := <-slots
	s.Release()
	g.Expect(<-got).To(Equal("ctrue <nil>"))
	s = <-slots
	s.Release()
	g.Eventually(func() bool {
		d, _ := take(t, guard, req)
		return d.Allowed
	}, 10*time.Second, 20*time.Millisecond).Should(BeTrue(), "the last holder gave the slot back to Redis")
}

func TestConcurrencyGiveBackWhoseReplyIsLostIsNotSentTwice(t *testing.T) {
	g := NewWithT(t)
	server := redistest.Start(t)
	a, b := newGuard(t, server.URL()), newGuard(t, server.URL())
	req := concurrencyRequest(t, 2, 1, config.FailClosed)
	_, first := take(t, a, req)
	_, second := take(t, a, req)
	g.Expect(first.holds() && second.holds()).To(BeTrue())

	// Redis stops answering: the give-back is written, its reply never
	// comes within the call's timeout, and Redis runs it once it resumes
	server.Freeze()
	first.Release()
	time.Sleep(slotCallTimeout + 500*time.Millisecond)
	server.Thaw()
	a.slots.flush(a.redis) // what the flusher would send next

	d, s := take(t, b, req)
	g.Expect(d.Allowed).To(BeTrue(), "the slot given back is free")
	d, _ = take(t, b, req)
	g.Expect(d.Allowed).To(BeFalse(), "the slot still held stays counted: the give-back ran once")
	s.Release()
	second.Release()
}

func TestOnlyCallsThatNeverRanAreUnsent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	gone := redistest.Start(t)
	addr := gone.Addr()
	gone.Stop()
	down := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer down.Close()
	err := down.Ping(ctx).Err()
	g.Expect(err).To(HaveOccurred())
	g.Expect(unsent(err)).To(BeTrue(), "no connection: never written (%v)", err)

	frozen := redistest.Start(t)
	slow := redis.NewClient(&redis.Options{Addr: frozen.Addr(), MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
	defer slow.Close()
	g.Expect(slow.Ping(ctx).Err()).To(Succeed())
	frozen.Freeze()
	err = slow.Ping(ctx).Err()
	frozen.Thaw()
	g.Expect(err).To(HaveOccurred())
	g.Expect(unsent(err)).To(BeFalse(), "written, its reply lost: it may have run (%v)", err)

	g.Expect(unsent(redis.ErrPoolTimeout)).To(BeTrue())
}
