package overload

import (
	"net"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/sluice-dev/sluice/enforcer/limiter"
)

func TestLimitsFor(t *testing.T) {
	g := NewWithT(t)
	// The injected sidecar's 128Mi limit, GOMEMLIMIT at 80% of it.
	l := LimitsFor(128 << 20 * 8 / 10)
	g.Expect(l.MaxInFlight).To(Equal(741))
	g.Expect(l.MaxConnections).To(Equal(1112))
	g.Expect(l.MaxInFlightPerTenant).To(Equal(185))
	g.Expect(int64(l.MaxInFlight)*RequestCost + BaselineMemory).To(BeNumerically("<", 128<<20*8/10))

	none := LimitsFor(1<<63 - 1)
	g.Expect(none).To(Equal(Limits{MaxInFlight: DefaultMaxInFlight, MaxConnections: DefaultMaxConnections,
		MaxInFlightPerTenant: DefaultMaxInFlight / 4}))
	g.Expect(LimitsFor(8<<20).MaxInFlight).To(Equal(56), "a limit under the baseline still serves a few")
}

func TestOverloadBoundsInFlightAndTenants(t *testing.T) {
	g := NewWithT(t)
	o := New(Limits{MaxInFlight: 3, MaxInFlightPerTenant: 2})
	a, b := limiter.Bucket{Policy: "p", Rule: "r", Tenant: "a"}, limiter.Bucket{Policy: "p", Rule: "r", Tenant: "b"}
	for range 3 {
		_, ok := o.Admit()
		g.Expect(ok).To(BeTrue())
	}
	reason, ok := o.Admit()
	g.Expect(ok).To(BeFalse())
	g.Expect(reason).To(Equal(ShedInFlight))
	o.Done()
	_, ok = o.Admit()
	g.Expect(ok).To(BeTrue(), "a place given back is taken again")

	g.Expect(o.AdmitTenant(a)).To(BeTrue())
	g.Expect(o.AdmitTenant(a)).To(BeTrue())
	g.Expect(o.AdmitTenant(a)).To(BeFalse(), "tenant a holds its share")
	g.Expect(o.AdmitTenant(b)).To(BeTrue(), "tenant b has its own")
	o.DoneTenant(a)
	g.Expect(o.AdmitTenant(a)).To(BeTrue())
	st := o.State()
	g.Expect(st.InFlight).To(Equal(int64(3)))
	g.Expect(st.Overloaded).To(BeTrue(), "at its bound in flight")
	g.Expect(st.Shed).To(HaveKeyWithValue(ShedInFlight, int64(1)))
	g.Expect(st.Shed).To(HaveKeyWithValue(ShedTenant, int64(1)))

	var none *Shedder
	_, ok = none.Admit()
	g.Expect(ok).To(BeTrue(), "no Shedder bounds nothing")
	g.Expect(none.AdmitTenant(a)).To(BeTrue())
}

// TestOverloadShedsNearTheMemoryLimit: above 90% of the soft limit new
// requests are refused and idle connections closed, until memory is under
// 80% again.
func TestOverloadShedsNearTheMemoryLimit(t *testing.T) {
	g := NewWithT(t)
	o := New(Limits{MaxInFlight: 100, MaxInFlightPerTenant: 100, MemoryLimit: 100 << 20})
	idle, idlePeer := net.Pipe()
	busy, busyPeer := net.Pipe()
	defer idlePeer.Close()
	defer busyPeer.Close()
	o.ConnState(idle, http.StateIdle)
	o.ConnState(busy, http.StateActive)

	o.observeMemory(85 << 20)
	_, ok := o.Admit()
	g.Expect(ok).To(BeTrue())
	o.Done()

	o.observeMemory(91 << 20)
	reason, ok := o.Admit()
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
	_, ok = o.Admit()
	g.Expect(ok).To(BeFalse(), "between 80% and 90% shedding goes on")
	o.observeMemory(79 << 20)
	_, ok = o.Admit()
	g.Expect(ok).To(BeTrue(), "under 80% it ends")
	g.Expect(o.State().Overloaded).To(BeFalse())
}
