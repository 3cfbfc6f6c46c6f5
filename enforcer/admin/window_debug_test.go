package admin

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// TestAWindowShowsWhatItIs writes each kind of window as /debug/tenant
// does: a calendar window by its unit and zone, with no period of 0s, and
// a Concurrency window by the requests it lets in flight, with no limit of
// 0 requests.
func TestAWindowShowsWhatItIs(t *testing.T) {
	g := NewWithT(t)
	show := func(a limiter.Algorithm, w limiter.Window) map[string]any {
		b, err := json.Marshal(debugapi.WindowUsage{Limit: WindowLimit(a, w), Capacity: w.Requests})
		g.Expect(err).NotTo(HaveOccurred())
		var m map[string]any
		g.Expect(json.Unmarshal(b, &m)).To(Succeed())
		return m
	}
	month := show(limiter.FixedWindow, limiter.Window{Requests: 10000, Calendar: &config.Calendar{Unit: config.CalendarMonth}})
	g.Expect(month).NotTo(HaveKey("period"))
	g.Expect(month).To(HaveKeyWithValue("requests", 10000.0))
	g.Expect(month).To(HaveKeyWithValue("calendar", map[string]any{"unit": string(config.CalendarMonth), "timeZone": "UTC"}))

	slots := show(limiter.Concurrency, limiter.ConcurrencyWindow(3))
	g.Expect(slots).NotTo(HaveKey("period"))
	g.Expect(slots).NotTo(HaveKey("requests"))
	g.Expect(slots).To(HaveKeyWithValue("concurrent", 3.0))
	g.Expect(slots).To(HaveKeyWithValue("limit", 3.0))

	rate := show(limiter.TokenBucket, limiter.Window{Requests: 10, Period: time.Second, Burst: 50})
	g.Expect(rate).To(HaveKeyWithValue("period", "1s"))
	g.Expect(rate).To(HaveKeyWithValue("requests", 10.0))
	g.Expect(rate).To(HaveKeyWithValue("burst", 50.0))
}
