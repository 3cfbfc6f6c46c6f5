package proxy

import (
	"context"
	"net/http"
	"sync"

	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/overload"
	"github.com/sluice-dev/sluice/enforcer/request"
	"github.com/sluice-dev/sluice/enforcer/rules"
)

// A request's path through the enforcer, read top to bottom. Each stage
// has one concern and reports whether the request goes on; a stage that
// stops it has answered. What a stage takes that outlives it (a place in
// a bound, a slot, an answer to settle) is recorded in the exchange and
// given back by finish, on every end of the request. A limit kind that
// acts on the request adds a stage here; one that acts on the answer
// settles in the forward stage's answer writer.
var pipeline = [...]stage{
	(*Handler).loadSnapshot,  // the configuration in service, or 503 before the first
	(*Handler).admitLoad,     // overload: the enforcer's bound on requests in flight
	(*Handler).readForm,      // a form's _method, read before deciding, as the application will
	(*Handler).canonicalize,  // the one request the application will receive, or 400/413
	(*Handler).collectChecks, // the checks of the rules it matches
	(*Handler).admitTenant,   // overload: one tenant's share of the bound
	(*Handler).queueDelays,   // delay rules: a place in the wait queue, taken before deciding
	(*Handler).decide,        // every check, one round trip per Redis
	(*Handler).awaitSlots,    // Concurrency: Retry-After, a slot handed over, refusals counted
	(*Handler).judge,         // the verdict: settled in Redis, headers, metrics
	(*Handler).refuse,        // 429 (503 fail-closed) for a refused request
	(*Handler).wait,          // delay rules: until the capacity booked is due
	(*Handler).forward,       // to the application; its answer is settled as it ends
}

// stage is one step of the pipeline.
type stage func(h *Handler, x *exchange) (goOn bool)

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := exchangePool.Get().(*exchange)
	x.w, x.r = w, r
	// deferred: an answer broken off by its client unwinds the handler
	// (http.ErrAbortHandler), and is settled too
	defer h.finish(x)
	for _, run := range pipeline {
		if !run(h, x) {
			return
		}
	}
}

// exchange is one request on its way: what the stages found, and what
// they took that finish gives back. Exchanges are pooled, so that the
// request path allocates no slices of its own.
type exchange struct {
	w    http.ResponseWriter
	r    *http.Request
	snap *inService
	// ctx is the request's context without its cancellation: a client
	// hanging up must neither count as a Redis failure (enough of them
	// would trip every policy into its failure mode) nor stop a refund
	// half way. Redis calls are bounded by the policies' timeouts.
	ctx context.Context

	req    request.Request
	checks []rules.Check
	// batch holds the checks' requests, guards and outcomes (decide).
	batch engine.Batch
	// refusing is the check that refuses the request, -1 when none;
	// wouldDeny, that a DryRun check would have (judge).
	refusing  int
	wouldDeny bool
	// delays say, per check, whether it holds a place in the delay queue
	// (delay.go); empty when no check's rule delays.
	delays []uint8
	buf    []byte

	// What finish gives back: the place in the overload bound, the
	// buffered form, the tenant's place, the answer to settle and the
	// context that outlives its client.
	inFlight, tenantHeld bool
	unbuffer             func()
	tenant               limiter.Bucket
	answer               *answerWriter
	stop                 func()
}

// A pooled exchange has room for two checks, which most requests need
// (one limited rule, perhaps a tier's); a request with more grows its
// exchange once, and the pool keeps the larger one. There is one exchange
// per request in flight.
var exchangePool = sync.Pool{New: func() any {
	x := &exchange{
		checks: make([]rules.Check, 0, 2),
		buf:    make([]byte, 0, 256),
	}
	x.batch.Requests = make([]limiter.Request, 0, 2)
	x.batch.Guards = make([]*limiter.Guard, 0, 2)
	x.batch.Admissions = make([]limiter.Admission, 0, 2)
	return x
}}

// finish gives back, in the reverse order of taking, what the request
// holds on any end: it settles the answer, stops the context that
// outlived the client, frees the slots, leaves the tenant's and the
// enforcer's bounds, and puts the exchange back in the pool.
func (h *Handler) finish(x *exchange) {
	if x.answer != nil {
		x.answer.end()
	}
	if x.stop != nil {
		x.stop()
	}
	x.batch.Release()
	if x.tenantHeld {
		h.overload.DoneTenant(x.tenant)
	}
	if x.unbuffer != nil {
		x.unbuffer()
	}
	if x.inFlight {
		h.overload.Done()
	}
	x.reset()
	exchangePool.Put(x)
}

// reset empties x for the next request, dropping the references it holds
// to this one's.
func (x *exchange) reset() {
	clear(x.checks) // the requests' identities
	x.batch.Reset()
	*x = exchange{checks: x.checks[:0], batch: x.batch, delays: x.delays[:0], buf: x.buf[:0]}
}

// loadSnapshot takes the configuration in service, which decides the
// request from start to end; before the first (cmd/enforcer swaps one in
// before it serves) the request is refused.
func (h *Handler) loadSnapshot(x *exchange) bool {
	if x.snap = h.live.Load(); x.snap == nil {
		writeProblem(x.w, x.r, &Problem{Type: ProblemLimiterUnavailable, Title: "Rate limiter starting",
			Status: http.StatusServiceUnavailable, RetryAfter: 1})
		return false
	}
	return true
}

// admitLoad holds the request within the enforcer's bound on requests in
// flight. Newest first: what is in flight goes on, a request past the
// bound is refused before it holds anything more.
func (h *Handler) admitLoad(x *exchange) bool {
	if reason, ok := h.overload.Admit(); !ok {
		closeAfter(x.w, x.r) // an HTTP/1 connection held by nothing is room too
		writeProblem(x.w, x.r, overloadProblem(reason))
		return false
	}
	x.inFlight = true
	return true
}

// admitTenant holds the request within its tenant's share of the bound.
func (h *Handler) admitTenant(x *exchange) bool {
	if len(x.checks) == 0 {
		return true
	}
	tenant := x.checks[0].Request.Bucket
	if !h.overload.AdmitTenant(tenant) {
		closeAfter(x.w, x.r)
		writeProblem(x.w, x.r, overloadProblem(overload.ShedTenant))
		return false
	}
	x.tenant, x.tenantHeld = tenant, true
	return true
}
