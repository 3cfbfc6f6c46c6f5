package limiter

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// banRule is a checked rule of algorithm a, 2 requests per hour, with a
// ban after denials refusals within a minute, for a tenant of the test's own.
func banRule(t *testing.T, a Algorithm, l config.Leasing, ban banSpec) Request {
	t.Helper()
	b := bucketFor(t)
	b.Tenant = HashTenant("salt", fmt.Sprint(t.Name(), time.Now().UnixNano()))
	rule, err := newRule(b, a, []Window{{Requests: 2, Period: time.Hour}}, 1,
		FailurePolicy{Mode: config.FailOpen, Timeout: time.Second}, withLeasing(l), withBan(&ban))
	if err != nil {
		t.Fatal(err)
	}
	return rule.Request(b.Tenant)
}

func TestBanStartsAtExactlyTheNthRefusalOnEveryAlgorithm(t *testing.T) {
	for name, url := range topologies() {
		for _, a := range config.Algorithms {
			t.Run(name+"/"+string(a), func(t *testing.T) {
				g := NewWithT(t)
				r := newRedis(t, url)
				req := banRule(t, a, config.LeasingOff, banSpec{Denials: 3, Within: time.Minute,
					Durations: []time.Duration{time.Hour}, ForgetAfter: time.Hour})
				ctx := context.Background()
				for i := range 2 {
					d, err := r.check(ctx, &req, 1)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(d.Allowed).To(BeTrue(), "request %d fits the limit", i+1)
				}
				for i := range 2 {
					d, err := r.check(ctx, &req, 1)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(d.Allowed).To(BeFalse())
					g.Expect(d.Ban.Active()).To(BeFalse(), "refusal %d of 3 starts no ban", i+1)
				}
				d, err := r.check(ctx, &req, 1)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(d.Ban.Active()).To(BeTrue(), "the third refusal starts the ban")
				g.Expect(d.Ban.Started).To(BeTrue())
				g.Expect(d.Ban.Level).To(Equal(int64(1)))
				g.Expect(d.Ban.Denials).To(Equal(int64(3)))
				g.Expect(d.Ban.Until.Sub(d.Now)).To(BeNumerically("~", time.Hour, time.Second))
				g.Expect(d.RetryAfter).To(BeNumerically(">=", d.Ban.Until.Sub(d.Now)), "no sooner than the ban ends")

				d, err = r.check(ctx, &req, 1)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(d.Ban.Active()).To(BeTrue(), "banned")
				g.Expect(d.Ban.Started).To(BeFalse())
				g.Expect(d.Reset).To(Equal(d.Ban.Until))

				// a read consumes nothing and says the tenant is banned
				d, err = r.check(ctx, &req, 0)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(d.Ban.Active()).To(BeTrue())
			})
		}
	}
}

// Escalation, forgetting and within are Redis' to decide, on its TIME:
// these tests wait for it, with durations as short as a busy machine
// allows.
func TestBanEscalatesAndIsForgotten(t *testing.T) {
	g := NewWithT(t)
	r := newRedis(t, standalone.URL())
	// TokenBucket of 2 per hour: refusals all the way
	req := banRule(t, TokenBucket, config.LeasingOff, banSpec{Denials: 1, Within: time.Minute,
		Durations: []time.Duration{300 * time.Millisecond, 600 * time.Millisecond}, ForgetAfter: 700 * time.Millisecond})
	ctx := context.Background()
	refuse := func() Decision {
		t.Helper()
		d, err := r.check(ctx, &req, 1)
		g.Expect(err).NotTo(HaveOccurred())
		return d
	}
	refuse()
	refuse()
	first := refuse()
	g.Expect(first.Ban.Level).To(Equal(int64(1)))
	g.Expect(first.Ban.Until.Sub(first.Now)).To(BeNumerically("<=", 300*time.Millisecond))
	time.Sleep(350 * time.Millisecond)
	second := refuse()
	g.Expect(second.Ban.Started).To(BeTrue(), "a refusal after the first ban starts the next")
	g.Expect(second.Ban.Level).To(Equal(int64(2)))
	g.Expect(second.Ban.Until.Sub(second.Now)).To(BeNumerically(">", 300*time.Millisecond), "the second duration")
	time.Sleep(650 * time.Millisecond)
	third := refuse()
	g.Expect(third.Ban.Level).To(Equal(int64(3)), "past the last duration, the last repeats")
	g.Expect(third.Ban.Until.Sub(third.Now)).To(BeNumerically(">", 300*time.Millisecond))
	time.Sleep(600*time.Millisecond + 750*time.Millisecond) // the ban, then forgetAfter
	again := refuse()
	g.Expect(again.Ban.Level).To(Equal(int64(1)), "forgotten after forgetAfter")
}

func TestBanRefusalsOutsideWithinDoNotAddUp(t *testing.T) {
	g := NewWithT(t)
	r := newRedis(t, standalone.URL())
	req := banRule(t, SlidingWindowLog, config.LeasingOff, banSpec{Denials: 2, Within: 300 * time.Millisecond,
		Durations: []time.Duration{time.Hour}, ForgetAfter: time.Hour})
	ctx := context.Background()
	for range 3 {
		_, err := r.check(ctx, &req, 1) // 2 admitted, 1 refused
		g.Expect(err).NotTo(HaveOccurred())
	}
	time.Sleep(400 * time.Millisecond)
	d, err := r.check(ctx, &req, 1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Ban.Active()).To(BeFalse(), "the two refusals were further apart than within")
	d, err = r.check(ctx, &req, 1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Ban.Active()).To(BeTrue())
}

func TestGuardRefusesCachedBansWithoutRedisAndLifts(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			guard := newGuard(t, url)
			other := newGuard(t, url)
			// leasing stays on: admissions may come from leases, refusals never from the denial cache
			req := banRule(t, TokenBucket, config.LeasingAuto, banSpec{Denials: 2, Within: time.Minute,
				Durations: []time.Duration{time.Hour}, ForgetAfter: time.Hour})
			outcomes := make([]Admission, 0, 6)
			for range 4 {
				outcomes = append(outcomes, decideOnce(guard, req))
			}
			g.Expect(outcomes[1].Decision.Allowed).To(BeTrue())
			g.Expect(outcomes[2].Decision.Ban.Active()).To(BeFalse(), "the first refusal is counted, not cached")
			g.Expect(outcomes[2].Decision.Local).To(BeFalse())
			g.Expect(outcomes[3].Decision.Ban.Started).To(BeTrue())

			calls := guard.LeaseCounts(req.Bucket.Policy).RedisCalls.Load()
			for range 20 {
				o := decideOnce(guard, req)
				g.Expect(o.Decision.Ban.Active()).To(BeTrue())
				g.Expect(o.Decision.Local).To(BeTrue())
			}
			g.Expect(guard.LeaseCounts(req.Bucket.Policy).RedisCalls.Load()).To(Equal(calls), "a cached ban costs no Redis call")

			ctx := context.Background()
			g.Eventually(func() (int64, error) { return guard.ActiveBans(ctx, req.Bucket) }).Should(Equal(int64(1)))
			list, err := guard.ListBans(ctx, req.Bucket)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list).To(HaveLen(1))
			g.Expect(list[0].Tenant).To(Equal(req.Bucket.Tenant))
			g.Expect(list[0].Level).To(Equal(int64(1)))

			g.Expect(decideOnce(other, req).Decision.Ban.Active()).To(BeTrue(), "the other guard learns the ban from Redis")
			lifted, err := guard.LiftBan(ctx, req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lifted).To(BeTrue())
			g.Expect(decideOnce(guard, req).Decision.Ban.Active()).To(BeFalse(), "lifted here at once")
			g.Expect(guard.ActiveBans(ctx, req.Bucket)).To(Equal(int64(0)))
			st, err := guard.BanOf(ctx, req.Bucket)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Active()).To(BeFalse())
			g.Expect(st.Level).To(Equal(int64(0)), "a lift forgets the level")
		})
	}
}

func TestNewRuleRefusesABadBan(t *testing.T) {
	g := NewWithT(t)
	_, err := newRule(bucketFor(t), TokenBucket, []Window{{Requests: 1, Period: time.Second}}, 1, FailurePolicy{},
		withBan(&banSpec{Denials: 0, Within: time.Second, Durations: []time.Duration{time.Second}, ForgetAfter: time.Second}))
	g.Expect(err).To(MatchError(ErrInvalidRequest))
	_, err = newRule(bucketFor(t), TokenBucket, []Window{{Requests: 1, Period: time.Second}}, 1, FailurePolicy{},
		withBan(&banSpec{Denials: 1, Within: time.Second, ForgetAfter: time.Second}))
	g.Expect(err).To(MatchError(ErrInvalidRequest))
}

func TestACachedBanHoldsWhileRedisIsDown(t *testing.T) {
	g := NewWithT(t)
	server := redistest.Start(t)
	guard, clock := newGuardOnFakeClock(t, server.URL())
	req := banRule(t, SlidingWindowLog, config.LeasingOff, banSpec{Denials: 1, Within: time.Minute,
		Durations: []time.Duration{time.Hour}, ForgetAfter: time.Hour})
	for range 3 { // 2 admitted, the refusal bans
		decideOnce(guard, req)
	}
	g.Expect(decideOnce(guard, req).Decision.Ban.Active()).To(BeTrue())

	server.Stop()
	clock.advance(BanRecheck)
	// due for its check, which Redis cannot answer: the ban holds, it is
	// not the failure mode's (Open) to lift it
	o := decideOnce(guard, req)
	g.Expect(o.Err).NotTo(HaveOccurred())
	g.Expect(o.Decision.Allowed).To(BeFalse())
	g.Expect(o.Decision.Ban.Active()).To(BeTrue())
	g.Expect(decideOnce(guard, req).Decision.Ban.Active()).To(BeTrue())
}
