package proxy

import (
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/limiter"
)

func TestCallDeadline(t *testing.T) {
	for _, c := range []struct {
		contentType, timeout string
		want                 time.Duration
		ok                   bool
	}{
		{"application/grpc", "500m", 500 * time.Millisecond, true},
		{"application/grpc+proto", "2S", 2 * time.Second, true},
		{"application/grpc", "1H", time.Hour, true},
		{"application/grpc", "250000u", 250 * time.Millisecond, true},
		{"application/grpc", "5x", 0, false},
		{"application/grpc", "m", 0, false},
		{"application/grpc", "-5m", 0, false},
		{"application/grpc", "1234567890S", 0, false}, // more than 8 digits
		{"application/json", "500m", 0, false},        // not a gRPC call
	} {
		t.Run(c.contentType+" "+c.timeout, func(t *testing.T) {
			g := NewWithT(t)
			r := &http.Request{Header: http.Header{"Content-Type": {c.contentType}, "Grpc-Timeout": {c.timeout}}}
			got, ok := callDeadline(r)
			g.Expect(ok).To(Equal(c.ok))
			g.Expect(got).To(Equal(c.want))
		})
	}
}

func TestDelayQueueBounds(t *testing.T) {
	g := NewWithT(t)
	q := delayQueue{max: 3}
	a := limiter.Bucket{Namespace: "shop", Policy: "p", Rule: "search", Tenant: "a"}
	b := limiter.Bucket{Namespace: "shop", Policy: "p", Rule: "search", Tenant: "b"}
	n, _ := q.enter(a, 2)
	g.Expect(n).To(Equal(1))
	n, _ = q.enter(a, 2)
	g.Expect(n).To(Equal(2))
	n, scope := q.enter(a, 2)
	g.Expect(n).To(Equal(-1), "a's two places are taken")
	g.Expect(scope).To(Equal("tenant"))
	n, _ = q.enter(b, 2)
	g.Expect(n).To(Equal(3), "another tenant has places of its own")
	n, scope = q.enter(b, 2)
	g.Expect(n).To(Equal(-1), "the enforcer's three places are taken")
	g.Expect(scope).To(Equal("enforcer"))

	q.book(a, time.Unix(100, 0))
	q.book(a, time.Unix(50, 0))
	g.Expect(q.by[a].latest).To(Equal(time.Unix(100, 0)), "the latest slot")
	g.Expect(q.leave(a)).To(Equal(2))
	g.Expect(q.leave(a)).To(Equal(1))
	g.Expect(q.by).NotTo(HaveKey(a), "a bucket without places is forgotten")
	g.Expect(q.leave(b)).To(Equal(0))
}
