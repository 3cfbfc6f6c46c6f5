package limiter

import (
	"github.com/sluice-dev/sluice/enforcer/config"

	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/redis/go-redis/v9"
)

// µs is the resolution of Redis TIME, and so of every exact value below.
const µs = time.Microsecond

func allow(t *testing.T, r *Redis, req Request) Decision {
	t.Helper()
	d, err := r.Allow(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTokenBucketExactValues(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newRedis(t, url)
			// 60/min refills one token a second; the bucket holds 3.
			req := Request{Bucket: bucketFor(t), Algorithm: TokenBucket, Cost: 1,
				Windows: []Window{{Requests: 60, Period: time.Minute, Burst: 3}}}

			d1 := allow(t, r, req)
			g.Expect(d1.Allowed).To(BeTrue())
			g.Expect(d1.Limit).To(Equal(int64(3)), "a token bucket's limit is its capacity")
			g.Expect(d1.Remaining).To(Equal(int64(2)))
			g.Expect(d1.Reset).To(BeTemporally("~", d1.Now.Add(time.Second), µs))

			d2 := allow(t, r, req)
			g.Expect(d2.Remaining).To(Equal(int64(1)))
			// two tokens short of full, minus what refilled since d1
			g.Expect(d2.Reset).To(BeTemporally("~", d1.Now.Add(2*time.Second), µs))
			d3 := allow(t, r, req)
			g.Expect(d3.Allowed).To(BeTrue())
			g.Expect(d3.Remaining).To(Equal(int64(0)))

			d4 := allow(t, r, req)
			g.Expect(d4.Allowed).To(BeFalse())
			g.Expect(d4.Remaining).To(Equal(int64(0)))
			// the bucket refills from empty at d1 + 1s: one token a second
			g.Expect(d4.RetryAfter).To(BeNumerically("~", time.Second-d4.Now.Sub(d1.Now), µs))
			g.Expect(d4.Reset).To(BeTemporally("~", d1.Now.Add(3*time.Second), µs))

			// cost 2 needs two tokens: the wait is a second longer
			req.Cost = 2
			d5 := allow(t, r, req)
			g.Expect(d5.Allowed).To(BeFalse())
			g.Expect(d5.RetryAfter).To(BeNumerically("~", 2*time.Second-d5.Now.Sub(d1.Now), µs))

			ttl := r.client.PTTL(context.Background(), req.Bucket.Key(TokenBucket, time.Minute)).Val()
			g.Expect(ttl).To(BeNumerically(">", 2*time.Second), "state lives until the bucket is full again")
			g.Expect(ttl).To(BeNumerically("<=", 3*time.Second))
		})
	}
}

func TestFixedWindowExactValues(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newRedis(t, url)
			req := Request{Bucket: bucketFor(t), Algorithm: FixedWindow, Cost: 1,
				Windows: []Window{{Requests: 3, Period: time.Hour}}}

			d1 := allow(t, r, req)
			end := d1.Now.Truncate(time.Hour).Add(time.Hour)
			g.Expect(d1.Allowed).To(BeTrue())
			g.Expect(d1.Remaining).To(Equal(int64(2)))
			g.Expect(d1.Reset).To(Equal(end))

			req.Cost = 2
			d2 := allow(t, r, req)
			g.Expect(d2.Allowed).To(BeTrue())
			g.Expect(d2.Remaining).To(Equal(int64(0)))

			req.Cost = 1
			d3 := allow(t, r, req)
			g.Expect(d3.Allowed).To(BeFalse())
			g.Expect(d3.Reset).To(Equal(end))
			g.Expect(d3.RetryAfter).To(Equal(end.Sub(d3.Now)))

			ttl := r.client.PTTL(context.Background(), req.Bucket.Key(FixedWindow, time.Hour)).Val()
			g.Expect(ttl).To(BeNumerically("~", end.Sub(d3.Now), 50*time.Millisecond))
		})
	}
}

func TestSlidingWindowLogExactValues(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newRedis(t, url)
			req := Request{Bucket: bucketFor(t), Algorithm: SlidingWindowLog, Cost: 1,
				Windows: []Window{{Requests: 4, Period: time.Minute}}}

			d1 := allow(t, r, req)
			g.Expect(d1.Remaining).To(Equal(int64(3)))
			g.Expect(d1.Reset).To(Equal(d1.Now.Add(time.Minute)))
			// a cost of 2 records two entries in the same microsecond
			req.Cost = 2
			d2 := allow(t, r, req)
			g.Expect(d2.Allowed).To(BeTrue())
			g.Expect(d2.Remaining).To(Equal(int64(1)))
			key := req.Bucket.Key(SlidingWindowLog, time.Minute)
			g.Expect(r.client.ZCard(context.Background(), key).Val()).To(Equal(int64(3)))

			// 3 recorded + 2 > 4: the oldest entry, d1's, must leave first
			d3 := allow(t, r, req)
			g.Expect(d3.Allowed).To(BeFalse())
			g.Expect(d3.Remaining).To(Equal(int64(1)))
			g.Expect(d3.RetryAfter).To(Equal(d1.Now.Add(time.Minute).Sub(d3.Now)))
			g.Expect(d3.Reset).To(Equal(d2.Now.Add(time.Minute)))

			// 3 + 1 fits exactly; then cost 3 needs d1's and d2's entries gone
			req.Cost = 1
			g.Expect(allow(t, r, req).Allowed).To(BeTrue())
			req.Cost = 3
			d5 := allow(t, r, req)
			g.Expect(d5.Allowed).To(BeFalse())
			g.Expect(d5.RetryAfter).To(Equal(d2.Now.Add(time.Minute).Sub(d5.Now)))

			ttl := r.client.PTTL(context.Background(), key).Val()
			g.Expect(ttl).To(BeNumerically("~", time.Minute, 100*time.Millisecond))
		})
	}
}

func TestSlidingWindowCounterExactValues(t *testing.T) {
	for name, url := range topologies() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := newRedis(t, url)
			const period = time.Second
			req := Request{Bucket: bucketFor(t), Algorithm: SlidingWindowCounter, Cost: 1,
				Windows: []Window{{Requests: 4, Period: period}}}

			// Start early in a window so the four requests land in one.
			waitForWindowStart(t, r, period)
			var first Decision
			for i := range 4 {
				d := allow(t, r, req)
				g.Expect(d.Allowed).To(BeTrue())
				g.Expect(d.Remaining).To(Equal(int64(3 - i)))
				if i == 0 {
					first = d
				}
			}
			start := first.Now.Truncate(period)
			d5 := allow(t, r, req)
			g.Expect(d5.Allowed).To(BeFalse())
			g.Expect(d5.Reset).To(Equal(start.Add(2 * period)))
			// next window: the 4 weigh 4*(1-x); one more fits when x >= 1/4
			g.Expect(d5.RetryAfter).To(Equal(start.Add(period + period/4).Sub(d5.Now)))

			// In the next window the previous count is weighted.
			time.Sleep(start.Add(period + period/2).Sub(d5.Now))
			d6 := allow(t, r, req)
			elapsed := d6.Now.Sub(start.Add(period))
			estimate := 4 * float64(period-elapsed) / float64(period)
			g.Expect(d6.Allowed).To(BeTrue(), "estimate %.3f + 1 <= 4", estimate)
			g.Expect(d6.Remaining).To(Equal(int64(4 - estimate - 1)))
		})
	}
}

// waitForWindowStart sleeps until the first tenth of a window of period by
// Redis' clock.
func waitForWindowStart(t *testing.T, r *Redis, period time.Duration) {
	t.Helper()
	now, err := r.client.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if into := now.Sub(now.Truncate(period)); into > period/10 {
		time.Sleep(period - into)
	}
}

func TestMultiWindowRefusalConsumesNothing(t *testing.T) {
	for name, url := range topologies() {
		for _, a := range config.Algorithms {
			t.Run(name+"/"+string(a), func(t *testing.T) {
				g := NewWithT(t)
				r := newRedis(t, url)
				minute := Window{Requests: 10, Period: time.Minute}
				hour := Window{Requests: 3, Period: time.Hour}
				req := Request{Bucket: bucketFor(t), Algorithm: a, Cost: 1, Windows: []Window{minute, hour}}

				for range 3 {
					g.Expect(allow(t, r, req).Allowed).To(BeTrue())
				}
				for range 5 {
					d := allow(t, r, req)
					g.Expect(d.Allowed).To(BeFalse())
					g.Expect(d.Window).To(Equal(1), "the hourly window refuses")
					g.Expect(d.Limit).To(Equal(int64(3)))
				}
				// The minute window saw only the three admitted requests.
				alone := req
				alone.Windows = []Window{minute}
				d, err := r.Peek(context.Background(), mustCheck(t, alone))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(d.Remaining).To(Equal(int64(7)))
			})
		}
	}
}

func TestKeysAreHashTaggedAndHideTheTenant(t *testing.T) {
	g := NewWithT(t)
	r := newRedis(t, cluster.URL())
	apiKey := "sk_live_0123456789"
	req := Request{Algorithm: SlidingWindowLog, Cost: 1,
		Bucket:  Bucket{Namespace: "shop", Policy: "exports", Rule: "exports", Tenant: HashTenant("policy-uid", apiKey)},
		Windows: []Window{{Requests: 100, Period: time.Minute}, {Requests: 5000, Period: 24 * time.Hour}}}
	// On a cluster a multi-key script fails unless every key is in one slot.
	g.Expect(allow(t, r, req).Allowed).To(BeTrue())

	ctx := context.Background()
	minute, day := req.Bucket.Key(req.Algorithm, time.Minute), req.Bucket.Key(req.Algorithm, 24*time.Hour)
	g.Expect(minute).To(HavePrefix("sl:{shop/exports/exports/"))
	g.Expect(minute).To(HaveSuffix("}:swl:60s"))
	g.Expect(day).To(HaveSuffix("}:swl:86400s"))
	g.Expect(minute).NotTo(ContainSubstring(apiKey))
	slot := r.client.ClusterKeySlot(ctx, minute).Val()
	g.Expect(r.client.ClusterKeySlot(ctx, day).Val()).To(Equal(slot))

	// Nothing stored anywhere in the cluster names the raw API key.
	var mu sync.Mutex
	var keys []string
	err := cluster.ClusterClient().ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		k, err := c.Keys(ctx, "*").Result()
		mu.Lock()
		keys = append(keys, k...)
		mu.Unlock()
		return err
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys).To(ContainElements(minute, day))
	for _, k := range keys {
		g.Expect(k).NotTo(ContainSubstring(apiKey))
		if k == minute {
			members := r.client.ZRange(ctx, k, 0, -1).Val()
			g.Expect(strings.Join(members, ",")).NotTo(ContainSubstring(apiKey))
		}
	}
}
