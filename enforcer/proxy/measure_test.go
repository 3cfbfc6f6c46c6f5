package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

func TestMeasuringWriterObservesTheFinalHeadOnce(t *testing.T) {
	g := NewWithT(t)
	a := &config.Adaptive{Latency: config.Duration{Duration: 20 * time.Millisecond}}
	m1, m2, m3 := limiter.NewMeter(a), limiter.NewMeter(a), limiter.NewMeter(a)
	rec := httptest.NewRecorder()
	w := &measuringWriter{ResponseWriter: rec, start: time.Now().Add(-50 * time.Millisecond), meters: [2]*limiter.Meter{m1, m2}, more: []*limiter.Meter{m3}}
	w.WriteHeader(http.StatusEarlyHints) // informational: not the answer
	w.WriteHeader(http.StatusBadGateway)
	_, _ = w.Write([]byte("x"))
	w.Flush()
	for _, m := range []*limiter.Meter{m1, m2, m3} {
		c := m.Take()
		g.Expect(c.Total).To(Equal(int64(1)), "one response, counted once for each adaptive rule")
		g.Expect(c.Errors).To(Equal(int64(1)))
		g.Expect(c.Slow).To(Equal(int64(1)), "50ms is over the 20ms target")
	}
	g.Expect(rec.Flushed).To(BeTrue(), "flushes reach the server's writer")

	// a body written without a head is a 200
	m := limiter.NewMeter(a)
	w = &measuringWriter{ResponseWriter: httptest.NewRecorder(), start: time.Now(), meters: [2]*limiter.Meter{m}}
	_, _ = w.Write([]byte("ok"))
	c := m.Take()
	g.Expect(c.Total).To(Equal(int64(1)))
	g.Expect(c.Errors).To(BeZero())
	g.Expect(c.Slow).To(BeZero())
}

func TestAdaptiveNote(t *testing.T) {
	NewWithT(t).Expect(adaptiveNote(4900)).To(Equal(" The limit is at 49% of its configured value while the application is over its health targets."))
}
