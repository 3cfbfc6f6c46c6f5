package rls

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// Envoy is told a calendar window's unit, whatever its length this month.
func TestCurrentLimitOfACalendarWindow(t *testing.T) {
	g := NewWithT(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	g.Expect(err).NotTo(HaveOccurred())
	w := limiter.Window{Requests: 10000, Calendar: config.CalendarIn(config.CalendarMonth, berlin)}
	l := currentLimit("", w)
	g.Expect(l.Unit).To(Equal(ratelimitv3.RateLimitResponse_RateLimit_MONTH))
	g.Expect(l.RequestsPerUnit).To(Equal(uint32(10000)))
	g.Expect(l.Name).To(Equal("10000/month (Europe/Berlin)"))
	g.Expect(currentLimit("plan", limiter.Window{Requests: 5, Calendar: config.CalendarIn(config.CalendarDay, time.UTC)}).Unit).
		To(Equal(ratelimitv3.RateLimitResponse_RateLimit_DAY))
}
