// Package proxy is the enforcer's request path: an http.Handler that makes
// each request canonical (package request), decides it against its
// policies' rules in one Redis round trip, answers 429 (or 503 when a
// fail-closed policy cannot decide) with rate limit headers and an RFC 9457
// problem, and otherwise hands the canonical request to the application
// (package transport), adding the headers to its response.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/overload"
	"github.com/sluice-dev/sluice/enforcer/request"
	"github.com/sluice-dev/sluice/enforcer/rules"
	"github.com/sluice-dev/sluice/enforcer/transport"
)

// Handler decides and forwards requests. It is safe for concurrent use.
type Handler struct {
	live     atomic.Pointer[inService]
	upstream upstream
	// protocol is the upstream protocol when no policy names one.
	protocol config.UpstreamProtocol
	rec      engine.Recorder
	limits   transport.RequestLimits
	maxBody  int64
	// delays are the requests waiting for their reservations (delay.go).
	delays delayQueue
	// overload bounds the requests in flight; nil: no bound.
	overload *overload.Shedder
}

// upstream is where admitted requests go: a *transport.Upstream, or an
// in-process stand-in where a benchmark measures the decision alone.
type upstream interface {
	Forward(w http.ResponseWriter, r *http.Request, protocol config.UpstreamProtocol)
	CloseIdleConnections()
}

// inService is the configuration in service and what the proxy alone
// derives from it.
type inService struct {
	*engine.Snapshot
	// protocol is how the policies forward to the application; empty when
	// no policy selects the pod (the Handler's default applies).
	protocol config.UpstreamProtocol
}

// Options configure a Handler.
type Options struct {
	// Upstream is the application's base URL, e.g. http://127.0.0.1:8080.
	Upstream *url.URL
	// Transport reaches the upstream; nil means transport.NewHTTP1() for
	// the requests that need a reverse proxy, and the enforcer's own
	// forwarder for plain ones. A Transport given here takes them all.
	Transport http.RoundTripper
	// Recorder is told every decision; nil records nothing.
	Recorder engine.Recorder
	// ErrorLog receives the reverse proxy's own errors (a client gone in
	// the middle of a body); nil discards them.
	ErrorLog *log.Logger
	// Limits bound request bodies and slow clients; the zero value sets no
	// limit (sluice-enforcer starts from transport.DefaultRequestLimits).
	Limits transport.RequestLimits
	// ResponseHeaderTimeout bounds the wait for the application's final
	// response head once a request is sent (a 504 when it expires); 0 is
	// no limit. transport.DefaultResponseHeaderTimeout is the suggested
	// value. A Transport given here keeps its own.
	ResponseHeaderTimeout time.Duration
	// UpstreamProtocol is how requests are forwarded while no policy of the
	// configuration in service selects the pod (its policies say
	// otherwise); empty means HTTP1. A Transport given here carries H2C
	// requests too.
	UpstreamProtocol config.UpstreamProtocol
	// MaxRequestBody is the largest request body forwarded, in bytes: a
	// larger declared length is answered 413 before anything reaches the
	// application, a chunked body growing over it is cut off (413 if the
	// application has not answered yet) with its connection. 0 is no limit.
	MaxRequestBody int64
	// MaxDelayed bounds the requests waiting at once for capacity booked
	// by delay rules (delay.go); 0 means DefaultMaxDelayed.
	MaxDelayed int
	// Overload bounds the requests in flight, in all and per tenant; nil
	// bounds nothing.
	Overload *overload.Shedder
}

// New is a Handler forwarding admitted requests as opts say. Serve no
// request before the first Swap.
func New(opts Options) *Handler {
	h := &Handler{rec: opts.Recorder, limits: opts.Limits, maxBody: opts.MaxRequestBody, protocol: opts.UpstreamProtocol.OrDefault(),
		overload: opts.Overload}
	if h.rec == nil {
		h.rec = engine.NopRecorder{}
	}
	h.delays.max = opts.MaxDelayed
	if h.delays.max <= 0 {
		h.delays.max = DefaultMaxDelayed
	}
	h.upstream = transport.New(transport.Options{Target: opts.Upstream, Transport: opts.Transport, ErrorLog: opts.ErrorLog,
		Limits: opts.Limits, ResponseHeaderTimeout: opts.ResponseHeaderTimeout, MaxRequestBody: opts.MaxRequestBody,
		OnError: h.forwardError})
	return h
}

// CloseIdleConnections closes the kept-alive connections to the
// application that no request is using; call it after the server has shut
// down.
func (h *Handler) CloseIdleConnections() { h.upstream.CloseIdleConnections() }

// forward passes an admitted request to the application, in the protocol
// of the snapshot's policies.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, snap *inService) {
	protocol := snap.protocol
	if protocol == "" {
		protocol = h.protocol
	}
	h.upstream.Forward(w, r, protocol)
}

// Swap puts s into service, carrying the adaptive state of the one in
// service over; requests already being decided finish with the snapshot
// they started with. A configuration whose policies forward with two
// protocols is refused, and the one in service stays.
func (h *Handler) Swap(s *engine.Snapshot) error {
	protocol, err := UpstreamProtocol(s.Config)
	if err != nil {
		return err
	}
	s.Adopt(h.Snapshot())
	h.live.Store(&inService{Snapshot: s, protocol: protocol})
	return nil
}

// Snapshot is the configuration in service, nil before the first Swap.
func (h *Handler) Snapshot() *engine.Snapshot {
	if live := h.live.Load(); live != nil {
		return live.Snapshot
	}
	return nil
}

// UpstreamProtocol is the one protocol cfg's policies forward with, empty
// when none selects the pod. The manager refuses policies that would give
// one pod two; a configuration that does anyway (a hand-written
// --policy-file) is refused, so that the enforcer keeps the one it runs.
func UpstreamProtocol(cfg *config.Config) (config.UpstreamProtocol, error) {
	if cfg == nil {
		return "", nil
	}
	var protocol config.UpstreamProtocol
	var first string
	for i := range cfg.Policies {
		p := &cfg.Policies[i]
		if p.Domain != "" {
			continue // the rate limit service's: it forwards nothing
		}
		switch got := p.UpstreamProtocol.OrDefault(); {
		case protocol == "":
			protocol, first = got, p.Name
		case got != protocol:
			return "", fmt.Errorf("policies %s and %s select this pod with different upstreamProtocol (%s, %s): "+
				"its enforcer speaks one protocol to the application; give both policies the same one", first, p.Name, protocol, got)
		}
	}
	return protocol, nil
}

// requestState is the scratch space of one request, pooled so that the
// request path allocates no slices of its own.
type requestState struct {
	req    request.Request
	checks []rules.Check
	reqs   []limiter.Request
	outs   []limiter.Outcome
	sub    []limiter.Outcome
	index  []int
	// counted are the refunded decisions' CountedAt, beside reqs.
	counted []time.Time
	buf     []byte
	// delays say, per check, whether it holds a place in the delay queue
	// (delay.go); empty when no check's rule delays.
	delays []uint8
}

// A pooled state holds about 1.5 KiB with room for two checks, which most
// requests need (one limited rule, perhaps a tier's); a request with more
// grows its state once, and the pool keeps the larger one. There is one
// state per request in flight.
var statePool = sync.Pool{New: func() any {
	return &requestState{
		checks: make([]rules.Check, 0, 2),
		reqs:   make([]limiter.Request, 0, 2),
		outs:   make([]limiter.Outcome, 0, 2),
		buf:    make([]byte, 0, 256),
	}
}}

func (st *requestState) release() {
	st.req = request.Request{}
	clear(st.checks) // drop references to requests' identities
	clear(st.reqs)
	st.checks, st.reqs = st.checks[:0], st.reqs[:0]
	st.delays = st.delays[:0]
	statePool.Put(st)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	snap := h.live.Load()
	if snap == nil { // not configured yet: cmd/enforcer swaps before serving
		writeProblem(w, r, &Problem{Type: ProblemLimiterUnavailable, Title: "Rate limiter starting",
			Status: http.StatusServiceUnavailable, RetryAfter: 1})
		return
	}
	// Newest first: what is in flight goes on, a request past the bound
	// is refused before it holds anything more.
	if reason, ok := h.overload.Admit(); !ok {
		closeAfter(w, r) // an HTTP/1 connection held by nothing is room too
		writeProblem(w, r, overloaded(reason))
		return
	}
	defer h.overload.Done()
	// A form may ask to be routed as another method (_method); read it
	// before deciding, as the application will.
	if transport.IsShortForm(r) {
		w2, g := h.limits.Guard(w, r)
		release, err := transport.BufferBody(r)
		g.Done()
		if err != nil {
			h.bodyError(w2, r, err)
			return
		}
		defer release()
	}
	st := statePool.Get().(*requestState)
	var err error
	if st.req, err = snap.Table.Canonicalize(r); err != nil {
		st.release()
		h.refuseMalformed(w, r, err)
		return
	}
	if p := tooLarge(r, h.maxBody); p != nil {
		st.release()
		h.rec.Refused(p.reason)
		writeProblem(w, r, &p.Problem)
		return
	}
	st.checks = snap.Table.Checks(&st.req, st.checks[:0])
	if len(st.checks) == 0 {
		st.release()
		h.forward(w, r, snap)
		return
	}
	// One tenant takes a share of the bound at most.
	tenant := st.checks[0].Request.Bucket
	if !h.overload.AdmitTenant(tenant) {
		st.release()
		closeAfter(w, r)
		writeProblem(w, r, overloaded(overload.ShedTenant))
		return
	}
	defer h.overload.DoneTenant(tenant)
	// A client hanging up must neither count as a Redis failure (enough of
	// them would trip every policy into its failure mode) nor stop a
	// refund half way: Redis calls are bounded by the policies' timeouts,
	// not by the client.
	ctx := context.WithoutCancel(r.Context())
	h.enqueue(st)
	h.decide(ctx, snap, st)
	h.concurrencyAnswers(snap, st)
	refusing, wouldDeny := h.evaluate(st)
	var handed *heldSlots
	if refusing >= 0 {
		if handed = h.awaitSlots(r.Context(), snap, st); handed != nil {
			refusing, wouldDeny = h.evaluate(st)
		}
	}
	h.countSlotRefusals(snap, st)
	if refusing >= 0 {
		h.refund(ctx, snap, st)
		h.freeRefusedLocal(snap, st)
	}
	hdr := w.Header()
	st.buf = writeLimitHeaders(hdr, st.checks, st.outs, refusing, st.buf)
	if wouldDeny {
		st.buf = writeWouldDeny(hdr, st.checks, st.outs, st.buf)
	}
	h.record(st)
	if refusing >= 0 {
		p := refusal(&st.checks[refusing], &st.outs[refusing].Decision)
		queueFullDetail(st, refusing, p)
		h.dequeue(st, false)
		st.release()
		writeProblem(w, r, p)
		return
	}
	slots := h.holdSlots(snap, st, handed)
	defer slots.free()
	if wait := h.dequeue(st, true); wait > 0 && !h.await(ctx, w, r, snap, st, wait) {
		st.release()
		return
	}
	w = measure(w, st)
	aw := h.answered(w, snap, st)
	st.release()
	if aw == nil {
		h.forward(w, r, snap)
		return
	}
	if aw.wantsUsage {
		offerReadable(r.Header)
	}
	// The enforcer reads the answer's trailers (a reported cost, a gRPC
	// status): it asks for them whether or not the client does.
	r.Header["Te"] = []string{"trailers"}
	// The answer is read to its end however the client ends the exchange,
	// and settled on every end, a broken-off one included.
	ctx, stop := outliving(r.Context())
	defer stop()
	defer aw.ended()
	h.forward(aw, r.WithContext(ctx), snap)
	aw.complete = aw.status != -1 && aw.dropped <= answerDrainBytes
}

// refuseMalformed answers 400 to a request the application could read
// otherwise than the limiter, and closes the connection: what follows on
// it cannot be trusted to be framed as the client meant either.
func (h *Handler) refuseMalformed(w http.ResponseWriter, r *http.Request, err error) {
	reason, detail := "malformed", err.Error()
	var re *request.Error
	if errors.As(err, &re) {
		reason, detail = re.Reason, re.Detail
	}
	h.rec.Refused(reason)
	closeAfter(w, r)
	writeProblem(w, r, &Problem{Type: ProblemBadRequest, Title: "Bad Request", Status: http.StatusBadRequest,
		Detail: detail + ". The rate limiter refuses requests that the application could read otherwise than it does."})
}

// decide asks each backend about its checks, in one round trip per backend.
func (h *Handler) decide(ctx context.Context, snap *inService, st *requestState) {
	if single := snap.Single(); single != nil {
		for i := range st.checks {
			st.reqs = append(st.reqs, st.checks[i].Request)
		}
		start := time.Now()
		st.outs = single.Guard.AllowAll(ctx, st.reqs, st.outs)
		h.observe(single, start, st.outs)
		return
	}
	// Policies on several Redis servers: one batch per server, in turn.
	st.outs = append(st.outs[:0], make([]limiter.Outcome, len(st.checks))...)
	for _, be := range snap.Backends() {
		st.reqs, st.index = st.reqs[:0], st.index[:0]
		for i := range st.checks {
			if snap.BackendOf(st.checks[i].Policy) == be {
				st.reqs = append(st.reqs, st.checks[i].Request)
				st.index = append(st.index, i)
			}
		}
		if len(st.index) == 0 {
			continue
		}
		start := time.Now()
		st.sub = be.Guard.AllowAll(ctx, st.reqs, st.sub)
		h.observe(be, start, st.sub)
		for k, i := range st.index {
			st.outs[i] = st.sub[k]
		}
	}
}

// observe records a round trip's latency, unless no request went to Redis
// (the guard skips Redis while it is known to be down, and decides from
// leases and cached refusals without it).
func (h *Handler) observe(be *engine.Backend, start time.Time, outs []limiter.Outcome) {
	for i := range outs {
		if !outs[i].Decision.Local && !errors.Is(outs[i].Err, limiter.ErrRedisUnavailable) {
			h.rec.RedisRoundTrip(be, time.Since(start))
			return
		}
	}
}

// refuses reports whether an outcome refuses its request. An outcome with
// no decision at all (an invalid request, which the route table should
// never produce) does not: a bug must not take the application down.
func refuses(o *limiter.Outcome) bool {
	return !o.Decision.Allowed && (o.Err == nil || o.Decision.Degraded)
}

// evaluate finds the check that refuses the request (the Enforce check with
// the longest wait), or -1, and whether a DryRun check would have.
func (h *Handler) evaluate(st *requestState) (refusing int, wouldDeny bool) {
	refusing = -1
	for i := range st.checks {
		o := &st.outs[i]
		if o.Err != nil && !o.Decision.Degraded {
			h.rec.CheckError(st.checks[i].Policy, o.Err)
			continue
		}
		if !refuses(o) {
			continue
		}
		if st.checks[i].Policy.DryRun {
			wouldDeny = true
		} else if refusing < 0 || o.Decision.RetryAfter > st.outs[refusing].Decision.RetryAfter {
			refusing = i
		}
	}
	return refusing, wouldDeny
}

// refund gives back what the refused request's other checks took, so that a
// refused request counts nowhere. Only what Redis admitted was taken. The
// refunded checks' outcomes then report what is left after the refund, so
// the refusal's headers tell what the next request finds.
func (h *Handler) refund(ctx context.Context, snap *inService, st *requestState) {
	for _, be := range snap.Backends() {
		st.reqs, st.index, st.counted = st.reqs[:0], st.index[:0], st.counted[:0]
		for i := range st.checks {
			if o := &st.outs[i]; o.Err == nil && o.Decision.Allowed && snap.BackendOf(st.checks[i].Policy) == be {
				st.reqs = append(st.reqs, st.checks[i].Request)
				st.index = append(st.index, i)
				st.counted = append(st.counted, o.Decision.CountedAt)
			}
		}
		if len(st.reqs) == 0 {
			continue
		}
		if be.Guard.Refund(ctx, st.reqs, st.counted) != nil {
			continue // best effort: at worst the refused request counts
		}
		for _, i := range st.index {
			st.outs[i].Decision.Remaining += st.checks[i].Request.Cost
		}
	}
}

// record reports each rule's and each policy's verdict.
func (h *Handler) record(st *requestState) {
	policyVerdict := engine.Allowed
	for i := range st.checks {
		c, o := &st.checks[i], &st.outs[i]
		v := engine.Allowed
		if refuses(o) {
			v = engine.Denied
			if o.Decision.Ban.Active() {
				v = engine.Banned
			}
			if c.Policy.DryRun {
				v = engine.WouldDeny
			}
		}
		if o.Decision.Degraded {
			h.rec.Degraded(c.Policy)
		}
		h.rec.Check(c.Policy, c.Rule, c.Tier, v)
		if tr, ok := h.rec.(engine.TenantRecorder); ok {
			tr.Tenant(c.Policy, c.Rule, c.Tenant, v)
		}
		policyVerdict = max(policyVerdict, v)
		// Checks come grouped by policy: close the group at its last check.
		if i == len(st.checks)-1 || st.checks[i+1].Policy != c.Policy {
			h.rec.Policy(c.Policy, policyVerdict)
			policyVerdict = engine.Allowed
		}
	}
}
