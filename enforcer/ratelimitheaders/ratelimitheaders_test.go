package ratelimitheaders

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/internal/testing/sfv"
)

// TestStructuredFieldsMatchTheDraft writes the examples of
// draft-ietf-httpapi-ratelimit-headers-10 (section 3 and 4) and checks them
// byte for byte, then checks that a parser reads them back.
func TestStructuredFieldsMatchTheDraft(t *testing.T) {
	g := NewWithT(t)
	var b []byte
	b = AppendString(b, "burst")
	b = AppendParam(b, "q", 100)
	b = AppendParam(b, "w", 60)
	b = AppendListSep(b)
	b = AppendString(b, "daily")
	b = AppendParam(b, "q", 1000)
	b = AppendParam(b, "w", 86400)
	g.Expect(string(b)).To(Equal(`"burst";q=100;w=60, "daily";q=1000;w=86400`))
	g.Expect(sfv.List(g, string(b))).To(Equal([]map[string]any{
		{"name": "burst", "q": int64(100), "w": int64(60)},
		{"name": "daily", "q": int64(1000), "w": int64(86400)},
	}))

	b = AppendParam(AppendString(nil, "default"), "r", 50)
	b = AppendParam(b, "t", 30)
	g.Expect(string(b)).To(Equal(`"default";r=50;t=30`))
	sfv.List(g, string(b))

	// Names are free text: escaped, or replaced where a String cannot hold them.
	b = AppendName(nil, `we"ird\pol`, "r\u00e9gle\x01")
	g.Expect(sfv.List(g, string(b))[0]["name"]).To(Equal(`we"ird\pol/r??gle?`))
	g.Expect(string(AppendParam(nil, "q", 1<<62))).To(Equal(";q=999999999999999"))
}

func TestItems(t *testing.T) {
	g := NewWithT(t)
	b := AppendPolicyItem(nil, "shop", "user", 60, 500*time.Millisecond)
	b = AppendListSep(b)
	b = AppendPolicyItem(b, "shop", "ip", 1000, time.Hour)
	g.Expect(string(b)).To(Equal(`"shop/user";q=60;w=1, "shop/ip";q=1000;w=3600`), "a window under a second is one second")
	sfv.List(g, string(b))
	b = AppendRateLimitItem(nil, "shop", "user", 59, 1500*time.Millisecond)
	g.Expect(string(b)).To(Equal(`"shop/user";r=59;t=2`))
	g.Expect(string(AppendRateLimitItem(nil, "p", "r", 0, -time.Second))).To(Equal(`"p/r";r=0;t=0`))

	g.Expect(CeilUnix(time.Unix(10, 1))).To(Equal(int64(11)))
	g.Expect(CeilUnix(time.Unix(10, 0))).To(Equal(int64(10)))
	g.Expect(RetryAfterSeconds(0)).To(Equal(int64(1)))
	g.Expect(RetryAfterSeconds(2001 * time.Millisecond)).To(Equal(int64(3)))
}

func TestBucketWindowIsTheTimeTheBurstTakesToComeBack(t *testing.T) {
	for _, tc := range []struct {
		capacity, requests int64
		period, want       time.Duration
	}{
		{50, 10, time.Second, 5 * time.Second},
		{10, 10, time.Minute, time.Minute},
		{15, 10, time.Second, 1500 * time.Millisecond},
		{5, 0, time.Second, time.Second},
	} {
		if got := BucketWindow(tc.capacity, tc.requests, tc.period); got != tc.want {
			t.Errorf("BucketWindow(%d, %d, %s) = %s, want %s", tc.capacity, tc.requests, tc.period, got, tc.want)
		}
	}
}
