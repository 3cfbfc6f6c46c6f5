// Package overload keeps what the enforcer holds under the bounds its
// memory allows: requests in flight, in total and per tenant, client
// connections, and memory near the soft limit. New work is refused first
// (newest first); what is in flight goes on.
package overload

import (
	"context"
	"hash/maphash"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// What one request waiting for the application, and one client connection,
// cost the enforcer, measured under a flood (docs/performance.md): a
// request's handler goroutine stack and net/http's buffers, its request and
// its state here; a connection's buffers and goroutines. They turn a memory
// limit into bounds.
const (
	RequestCost    = 48 << 10
	ConnectionCost = 16 << 10
	// BaselineMemory is what an idle enforcer holds (its resident memory
	// with a configuration loaded, before any request).
	BaselineMemory = 40 << 20
)

// Defaults without a known memory limit.
const (
	DefaultMaxInFlight    = 4096
	DefaultMaxConnections = 4096
)

// Limits bound what the enforcer holds in total.
type Limits struct {
	// MaxInFlight bounds the requests in flight (waiting for Redis, for a
	// delay or for the application); more get 503.
	MaxInFlight int
	// MaxInFlightPerTenant bounds the requests of one tenant (of the first
	// limited rule a request matches) in flight, so that one tenant's slow
	// requests cannot take the whole of MaxInFlight.
	MaxInFlightPerTenant int
	// MaxConnections bounds the client connections open at once; more
	// wait in the listener's accept queue.
	MaxConnections int
	// MemoryLimit is the soft memory limit (GOMEMLIMIT); 0 is none. Near
	// it (ShedAbove of it), new requests are refused and idle connections
	// closed until memory is back under ResumeBelow of it.
	MemoryLimit int64
}

// Memory thresholds, as fractions of Limits.MemoryLimit.
const (
	ShedAbove   = 0.90
	ResumeBelow = 0.80
)

// LimitsFor derives the bounds from a soft memory limit, the one
// GOMEMLIMIT sets (math.MaxInt64 when none): what is above the baseline,
// two thirds for requests in flight and a third for connections; a
// quarter of the requests for one tenant.
func LimitsFor(memoryLimit int64) Limits {
	l := Limits{MaxInFlight: DefaultMaxInFlight, MaxConnections: DefaultMaxConnections}
	if memoryLimit > 0 && memoryLimit < math.MaxInt64 {
		l.MemoryLimit = memoryLimit
		budget := max(int64(float64(memoryLimit)*ShedAbove)-BaselineMemory, 4<<20)
		l.MaxInFlight = int(max(budget*2/3/RequestCost, 16))
		l.MaxConnections = int(max(budget/3/ConnectionCost, 16))
	}
	l.MaxInFlightPerTenant = max(l.MaxInFlight/4, 1)
	return l
}

// SoftMemoryLimit is the process's GOMEMLIMIT, math.MaxInt64 when unset.
func SoftMemoryLimit() int64 { return debug.SetMemoryLimit(-1) }

// Shed reasons, the label of sluice_enforcer_shed_total.
const (
	ShedInFlight = "in_flight"
	ShedTenant   = "tenant_share"
	ShedMemory   = "memory"
	ShedIdleConn = "idle_connection"
)

// The counters of Shedder.shed, in the order of shedReasons.
const (
	shedInFlight = iota
	shedTenant
	shedMemory
	shedIdleConn
	shedReasonCount
)

var shedReasons = [shedReasonCount]string{ShedInFlight, ShedTenant, ShedMemory, ShedIdleConn}

// Shedder keeps what the enforcer holds under its limits: requests in
// flight, in total and per tenant, client connections, and memory. Its
// methods are safe for concurrent use; a nil *Shedder bounds nothing.
type Shedder struct {
	limits   Limits
	inFlight atomic.Int64
	tenants  [16]tenantShard
	seed     maphash.Seed
	shedding atomic.Bool
	shed     [shedReasonCount]atomic.Int64
	// since is when the shedding in progress began (Unix nanoseconds), 0
	// while none is.
	since atomic.Int64

	connMu sync.Mutex
	conns  map[net.Conn]http.ConnState
}

type tenantShard struct {
	mu sync.Mutex
	n  map[limiter.Bucket]int
}

// New bounds what the enforcer holds by l.
func New(l Limits) *Shedder {
	o := &Shedder{limits: l, seed: maphash.MakeSeed(), conns: map[net.Conn]http.ConnState{}}
	for i := range o.tenants {
		o.tenants[i].n = map[limiter.Bucket]int{}
	}
	return o
}

// Limits are the bounds o applies.
func (o *Shedder) Limits() Limits { return o.limits }

// Admit takes a place for a new request, or says why there is none.
func (o *Shedder) Admit() (reason string, ok bool) {
	if o == nil {
		return "", true
	}
	if o.shedding.Load() {
		o.shed[shedMemory].Add(1)
		return ShedMemory, false
	}
	if o.inFlight.Add(1) > int64(o.limits.MaxInFlight) {
		o.inFlight.Add(-1)
		o.shed[shedInFlight].Add(1)
		return ShedInFlight, false
	}
	return "", true
}

// Done gives back a place Admit gave.
func (o *Shedder) Done() {
	if o != nil {
		o.inFlight.Add(-1)
	}
}

// AdmitTenant takes one of bucket's tenant's places, or reports false
// when it holds its share already.
func (o *Shedder) AdmitTenant(b limiter.Bucket) bool {
	if o == nil {
		return true
	}
	s := o.shard(b)
	s.mu.Lock()
	n := s.n[b]
	if n >= o.limits.MaxInFlightPerTenant {
		s.mu.Unlock()
		o.shed[shedTenant].Add(1)
		return false
	}
	s.n[b] = n + 1
	s.mu.Unlock()
	return true
}

// DoneTenant gives back a place AdmitTenant gave.
func (o *Shedder) DoneTenant(b limiter.Bucket) {
	if o == nil {
		return
	}
	s := o.shard(b)
	s.mu.Lock()
	if n := s.n[b]; n > 1 {
		s.n[b] = n - 1
	} else {
		delete(s.n, b)
	}
	s.mu.Unlock()
}

func (o *Shedder) shard(b limiter.Bucket) *tenantShard {
	return &o.tenants[maphash.String(o.seed, string(b.Tenant))%uint64(len(o.tenants))]
}

// ConnState follows the client connections (http.Server.ConnState), so
// that idle ones can be closed under memory pressure.
func (o *Shedder) ConnState(c net.Conn, state http.ConnState) {
	if o == nil {
		return
	}
	o.connMu.Lock()
	switch state {
	case http.StateClosed, http.StateHijacked:
		delete(o.conns, c)
	default:
		o.conns[c] = state
	}
	o.connMu.Unlock()
}

// closeIdle closes the client connections with no request in progress.
func (o *Shedder) closeIdle() {
	o.connMu.Lock()
	var idle []net.Conn
	for c, st := range o.conns {
		if st == http.StateIdle {
			idle = append(idle, c)
		}
	}
	o.connMu.Unlock()
	for _, c := range idle {
		_ = c.Close()
	}
	o.shed[shedIdleConn].Add(int64(len(idle)))
}

// memoryInUse is what counts toward the soft memory limit: every byte the
// runtime holds from the system but the heap it has given back.
var memorySamples = []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}

// WatchMemory samples memory every interval until ctx ends and sheds new
// work while it is near the soft limit, newest first: new requests are
// refused and idle connections closed, the requests in flight go on.
func (o *Shedder) WatchMemory(ctx context.Context, interval time.Duration) {
	if o == nil || o.limits.MemoryLimit <= 0 {
		return
	}
	samples := append([]metrics.Sample(nil), memorySamples...)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(samples)
		used := int64(samples[0].Value.Uint64() - samples[1].Value.Uint64())
		o.observeMemory(used)
	}
}

// observeMemory moves in or out of shedding for memory used.
func (o *Shedder) observeMemory(used int64) {
	limit := float64(o.limits.MemoryLimit)
	switch {
	case !o.shedding.Load() && float64(used) >= limit*ShedAbove:
		o.shedding.Store(true)
		o.since.Store(time.Now().UnixNano())
		o.closeIdle()
	case o.shedding.Load() && float64(used) < limit*ResumeBelow:
		o.shedding.Store(false)
		o.since.Store(0)
	case o.shedding.Load():
		o.closeIdle() // connections gone idle since
	}
}

// State is what /status and metrics report of a Shedder.
type State struct {
	Overloaded  bool
	Since       time.Time // zero while not overloaded
	InFlight    int64
	Connections int
	Shed        map[string]int64
}

// State reports o's counts now.
func (o *Shedder) State() State {
	st := State{Overloaded: o.shedding.Load(), InFlight: o.inFlight.Load(), Shed: make(map[string]int64, shedReasonCount)}
	if ns := o.since.Load(); ns != 0 {
		st.Since = time.Unix(0, ns)
	}
	for i, r := range shedReasons {
		st.Shed[r] = o.shed[i].Load()
	}
	o.connMu.Lock()
	st.Connections = len(o.conns)
	o.connMu.Unlock()
	// At its bound in flight, the enforcer refuses what comes: overloaded
	// too, though memory is fine.
	st.Overloaded = st.Overloaded || st.InFlight >= int64(o.limits.MaxInFlight)
	return st
}
