package proxy

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/limiter"
)

func TestOverloadLimitsFor(t *testing.T) {
	g := NewWithT(t)
	// The injected sidecar's 128Mi limit, GOMEMLIMIT at 80% of it.
	l := OverloadLimitsFor(128 << 20 * 8 / 10)
	g.Expect(l.MaxInFlight).To(Equal(741))
	g.Expect(l.MaxConnections).To(Equal(1112))
	g.Expect(l.MaxInFlightPerTenant).To(Equal(185))
	g.Expect(int64(l.MaxInFlight)*RequestCost + BaselineMemory).To(BeNumerically("<", 128<<20*8/10))

	none := OverloadLimitsFor(1<<63 - 1)
	g.Expect(none).To(Equal(OverloadLimits{MaxInFlight: DefaultMaxInFlight, MaxConnections: DefaultMaxConnections,
		MaxInFlightPerTenant: DefaultMaxInFlight / 4}))
	g.Expect(OverloadLimitsFor(8<<20).MaxInFlight).To(Equal(56), "a limit under the baseline still serves a few")
}

func TestOverloadBoundsInFlightAndTenants(t *testing.T) {
	g := NewWithT(t)
	o := NewOverload(OverloadLimits{MaxInFlight: 3, MaxInFlightPerTenant: 2})
	a, b := limiter.Bucket{Policy: "p", Rule: "r", Tenant: "a"}, limiter.Bucket{Policy: "p", Rule: "r", Tenant: "b"}
	for range 3 {
		_, ok := o.admit()
		g.Expect(ok).To(BeTrue())
	}
	reason, ok := o.admit()
	g.Expect(ok).To(BeFalse())
	g.Expect(reason).To(Equal(ShedInFlight))
	o.done()
	_, ok = o.admit()
	g.Expect(ok).To(BeTrue(), "a place given back is taken again")

	g.Expect(o.admitTenant(a)).To(BeTrue())
	g.Expect(o.admitTenant(a)).To(BeTrue())
	g.Expect(o.admitTenant(a)).To(BeFalse(), "tenant a holds its share")
	g.Expect(o.admitTenant(b)).To(BeTrue(), "tenant b has its own")
	o.doneTenant(a)
	g.Expect(o.admitTenant(a)).To(BeTrue())
	st := o.State()
	g.Expect(st.InFlight).To(Equal(int64(3)))
	g.Expect(st.Overloaded).To(BeTrue(), "at its bound in flight")
	g.Expect(st.Shed).To(HaveKeyWithValue(ShedInFlight, int64(1)))
	g.Expect(st.Shed).To(HaveKeyWithValue(ShedTenant, int64(1)))

	var none *Overload
	_, ok = none.admit()
	g.Expect(ok).To(BeTrue(), "no Overload bounds nothing")
	g.Expect(none.admitTenant(a)).To(BeTrue())
}

// TestOverloadShedsNearTheMemoryLimit: above 90% of the soft limit new
// requests are refused and idle connections closed, until memory is under
// 80% again.
func TestOverloadShedsNearTheMemoryLimit(t *testing.T) {
	g := NewWithT(t)
	o := NewOverload(OverloadLimits{MaxInFlight: 100, MaxInFlightPerTenant: 100, MemoryLimit: 100 << 20})
	idle, idlePeer := net.Pipe()
	busy, busyPeer := net.Pipe()
	defer idlePeer.Close()
	defer busyPeer.Close()
	o.ConnState(idle, http.StateIdle)
	o.ConnState(busy, http.StateActive)

	o.observeMemory(85 << 20)
	_, ok := o.admit()
	g.Expect(ok).To(BeTrue())
	o.done()

	o.observeMemory(91 << 20)
	reason, ok := o.admit()
	g.Expect(ok).To(BeFalse())
	g.Expect(reason).To(Equal(ShedMemory))
	_, err := idlePeer.Write([]byte("x"))
	g.Expect(err).To(HaveOccurred(), "the idle connection is closed")
	go func() { _, _ = busyPeer.Write([]byte("x")) }()
	_, err = busy.Read(make([]byte, 1))
	g.Expect(err).NotTo(HaveOccurred(), "a connection with a request in progress is kept")
	st := o.State()
	g.Expect(st.Overloaded).To(BeTrue())
	g.Expect(st.Since.IsZero()).To(BeFalse())
	g.Expect(st.Shed).To(HaveKeyWithValue(ShedIdleConn, int64(1)))

	o.observeMemory(85 << 20)
	_, ok = o.admit()
	g.Expect(ok).To(BeFalse(), "between 80% and 90% shedding goes on")
	o.observeMemory(79 << 20)
	_, ok = o.admit()
	g.Expect(ok).To(BeTrue(), "under 80% it ends")
	g.Expect(o.State().Overloaded).To(BeFalse())
}

func TestOverloadedAnswer(t *testing.T) {
	g := NewWithT(t)
	h := New(Options{Overload: NewOverload(OverloadLimits{MaxInFlight: 0, MaxInFlightPerTenant: 1})})
	h.Swap(&Snapshot{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	g.Expect(rec.Code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(rec.Header().Get("Retry-After")).To(Equal("1"))
	g.Expect(rec.Header().Get("Content-Type")).To(Equal("application/problem+json"))
	g.Expect(rec.Header().Get("Connection")).To(Equal("close"))
	g.Expect(rec.Body.String()).To(ContainSubstring(ProblemOverloaded))

	grpc := httptest.NewRequest(http.MethodPost, "/shop.v1.Orders/Create", nil)
	grpc.ProtoMajor, grpc.Header["Content-Type"] = 2, []string{"application/grpc"}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, grpc)
	g.Expect(rec.Header().Get("Grpc-Status")).To(Equal("14"), "UNAVAILABLE")
}
