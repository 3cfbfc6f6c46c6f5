// Package proxy is the enforcer's request path: an http.Handler that makes
// each request canonical (package request), decides it against its
// policies' rules in one Redis round trip, answers 429 (or 503 when a
// fail-closed policy cannot decide) with rate limit headers and an RFC 9457
// problem, and otherwise forwards the canonical request to the application,
// adding the headers to its response: on the deciding goroutine over one
// pool of kept-alive connections (forward.go), upgrades through
// httputil.ReverseProxy (upstream.go).
package proxy

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/request"
	"github.com/sluice-dev/sluice/enforcer/route"
)

// Handler decides and forwards requests. It is safe for concurrent use.
type Handler struct {
	snap      atomic.Pointer[Snapshot]
	forwarder *forwarder   // plain requests; nil when a Transport was given
	upstream  http.Handler // the others: upgrades, streamed or large bodies
	transport http.RoundTripper
	// h2c forwards as cleartext HTTP/2, for the policies whose
	// upstreamProtocol is H2C; h2cCalls forwards their gRPC calls, which
	// no response header timeout bounds: a server stream may send its
	// first message (and with it its headers) whenever it has one, and
	// the call's deadline bounds it.
	h2c, h2cCalls http.Handler
	h2cTransports []*http.Transport // nil when a Transport was given
	// protocol is the upstream protocol when no policy names one.
	protocol config.UpstreamProtocol
	rec      Recorder
	limits   RequestLimits
	maxBody  int64
	// delays are the requests waiting for their reservations (delay.go).
	delays delayQueue
	// adaptive reports the adaptive rules' state (adaptive.go).
	adaptive adaptiveStates
	// overload bounds the requests in flight (overload.go); nil: no bound.
	overload *Overload
}

// Options configure a Handler.
type Options struct {
	// Upstream is the application's base URL, e.g. http://127.0.0.1:8080.
	Upstream *url.URL
	// Transport reaches the upstream; nil means NewTransport() for the
	// requests that need a reverse proxy, and the enforcer's own
	// forwarder for plain ones. A Transport given here takes them all.
	Transport http.RoundTripper
	// Recorder is told every decision; nil records nothing.
	Recorder Recorder
	// ErrorLog receives the reverse proxy's own errors (a client gone in
	// the middle of a body); nil discards them.
	ErrorLog *log.Logger
	// Limits bound request bodies and slow clients; the zero value sets no
	// limit (sluice-enforcer starts from DefaultRequestLimits).
	Limits RequestLimits
	// ResponseHeaderTimeout bounds the wait for the application's final
	// response head once a request is sent (a 504 when it expires); 0 is
	// no limit. DefaultResponseHeaderTimeout is the suggested value. A
	// Transport given here keeps its own.
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
	// by onLimit.delay rules (delay.go); 0 means DefaultMaxDelayed.
	MaxDelayed int
	// Overload bounds the requests in flight, in all and per tenant; nil
	// bounds nothing.
	Overload *Overload
}

// New is a Handler forwarding admitted requests as opts say. Serve no
// request before the first Swap.
func New(opts Options) *Handler {
	h := &Handler{rec: opts.Recorder, limits: opts.Limits, maxBody: opts.MaxRequestBody, protocol: opts.UpstreamProtocol.OrDefault(),
		overload: opts.Overload}
	if h.rec == nil {
		h.rec = NopRecorder{}
	}
	h.delays.max = opts.MaxDelayed
	if h.delays.max <= 0 {
		h.delays.max = DefaultMaxDelayed
	}
	h2cTransport, h2cCallTransport := opts.Transport, opts.Transport
	if opts.Transport == nil {
		plain, calls := NewH2CTransport(), NewH2CTransport()
		plain.ResponseHeaderTimeout = max(opts.ResponseHeaderTimeout, 0)
		h.h2cTransports = []*http.Transport{plain, calls}
		h2cTransport, h2cCallTransport = plain, calls
		h.forwarder = newForwarder(opts.Upstream, opts.ResponseHeaderTimeout, opts.MaxRequestBody)
		t := NewTransport()
		t.ResponseHeaderTimeout = max(opts.ResponseHeaderTimeout, 0)
		// One pool of connections, the forwarder's: the reverse proxy
		// carries upgrades, whose connections are never reused. Nor does it
		// pool for an application the forwarder cannot reach (https, a
		// path): the transport can hand a response the application sent
		// unasked to the next request (TestBrokenApplicationNeverDesyncs).
		t.DisableKeepAlives = true
		opts.Transport = t
	}
	h.transport = opts.Transport
	if opts.ErrorLog == nil {
		opts.ErrorLog = log.New(io.Discard, "", 0)
	}
	h.upstream = h.newReverseProxy(opts, opts.Transport)
	h.h2c = h.newReverseProxy(opts, h2cTransport)
	h.h2cCalls = h.newReverseProxy(opts, h2cCallTransport)
	return h
}

// newReverseProxy is a reverse proxy to the application through t.
func (h *Handler) newReverseProxy(opts Options, t http.RoundTripper) http.Handler {
	rp := NewUpstream(opts.Upstream, t, h.forwardError)
	rp.ErrorLog = opts.ErrorLog
	return &reverseProxy{proxy: rp, maxBody: opts.MaxRequestBody, onError: h.forwardError}
}

// CloseIdleConnections closes the kept-alive connections to the
// application that no request is using; call it after the server has shut
// down.
func (h *Handler) CloseIdleConnections() {
	if h.forwarder != nil {
		h.forwarder.closeIdle()
	}
	if t, ok := h.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	for _, t := range h.h2cTransports {
		t.CloseIdleConnections()
	}
}

// forward passes an admitted request to the application, within the
// request limits, in the protocol of the snapshot's policies: cleartext
// HTTP/2 for H2C, except upgrades (WebSocket), which HTTP/2 cannot carry
// and which go as HTTP/1.1 to the same port.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, snap *Snapshot) {
	w, g := h.limits.guard(w, r)
	defer g.done()
	release, err := bufferBody(r)
	if err != nil {
		h.bodyError(w, r, err)
		return
	}
	defer release()
	protocol := snap.protocol
	if protocol == "" {
		protocol = h.protocol
	}
	if protocol == config.UpstreamH2C && r.Header["Upgrade"] == nil {
		if isGRPCStream(r) {
			h.h2cCalls.ServeHTTP(w, r)
		} else {
			h.h2c.ServeHTTP(w, r)
		}
		return
	}
	if h.forwarder != nil && h.forwarder.takes(r) {
		h.forwarder.serve(w, r, h.forwardError)
		return
	}
	h.upstream.ServeHTTP(w, r)
}

// forwardError answers a failed exchange with the application: 408 when
// the client's body was too slow, else as upstreamError does.
func (h *Handler) forwardError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case bodyTimedOut(r, err):
		h.bodyError(w, r, errBodyTimeout)
		return
	case errors.As(err, new(*requestBodyError)) && !errors.As(err, new(*http.MaxBytesError)):
		h.bodyError(w, r, err)
		return
	}
	h.upstreamError(w, r, err)
}

// bodyError answers a request whose body could not be read: 408 when it
// was too slow, 400 when it broke off or broke its framing. Never nothing:
// net/http would then send 200 for the enforcer, with an empty body. A
// client that hung up does not read the answer, which costs nothing.
func (h *Handler) bodyError(w http.ResponseWriter, r *http.Request, err error) {
	closeAfter(w, r)
	if errors.Is(err, errBodyTimeout) {
		h.rec.Refused("body-timeout")
		writeProblem(w, r, &Problem{Type: ProblemRequestLimit, Title: "Request Timeout", Status: http.StatusRequestTimeout,
			Detail: "The request body did not arrive in time."})
		return
	}
	h.rec.Refused("body-malformed")
	writeProblem(w, r, &Problem{Type: ProblemBadRequest, Title: "Bad Request", Status: http.StatusBadRequest,
		Detail: "The request body ended early or its framing is malformed."})
}

// Swap puts s into service; requests already being decided finish with the
// snapshot they started with.
func (h *Handler) Swap(s *Snapshot) {
	h.adopt(s)
	h.snap.Store(s)
}

// Snapshot is the configuration in service, nil before the first Swap.
func (h *Handler) Snapshot() *Snapshot { return h.snap.Load() }

// requestState is the scratch space of one request, pooled so that the
// request path allocates no slices of its own.
type requestState struct {
	req    request.Request
	checks []route.Check
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

var statePool = sync.Pool{New: func() any {
	return &requestState{
		checks: make([]route.Check, 0, 8),
		reqs:   make([]limiter.Request, 0, 8),
		outs:   make([]limiter.Outcome, 0, 8),
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
	snap := h.snap.Load()
	if snap == nil { // not configured yet: cmd/enforcer swaps before serving
		writeProblem(w, r, &Problem{Type: ProblemLimiterUnavailable, Title: "Rate limiter starting",
			Status: http.StatusServiceUnavailable, RetryAfter: 1})
		return
	}
	// Newest first: what is in flight goes on, a request past the bound
	// is refused before it holds anything more.
	if reason, ok := h.overload.admit(); !ok {
		closeAfter(w, r) // an HTTP/1 connection held by nothing is room too
		writeProblem(w, r, overloaded(reason))
		return
	}
	defer h.overload.done()
	// A form may ask to be routed as another method (_method); read it
	// before deciding, as the application will.
	if isShortForm(r) {
		w2, g := h.limits.guard(w, r)
		release, err := bufferBody(r)
		g.done()
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
	if !h.overload.admitTenant(tenant) {
		st.release()
		closeAfter(w, r)
		writeProblem(w, r, overloaded(ShedTenant))
		return
	}
	defer h.overload.doneTenant(tenant)
	// A client hanging up must neither count as a Redis failure (enough of
	// them would trip every policy into its failure mode) nor stop a
	// refund half way: Redis calls are bounded by the policies' timeouts,
	// not by the client.
	ctx := context.WithoutCancel(r.Context())
	h.enqueue(st)
	h.decide(ctx, snap, st)
	refusing, wouldDeny := h.evaluate(st)
	if refusing >= 0 {
		h.refund(ctx, snap, st)
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
	if wait := h.dequeue(st, true); wait > 0 && !h.await(ctx, w, r, snap, st, wait) {
		st.release()
		return
	}
	w = measure(w, st)
	st.release()
	h.forward(w, r, snap)
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
func (h *Handler) decide(ctx context.Context, snap *Snapshot, st *requestState) {
	if snap.single != nil {
		for i := range st.checks {
			st.reqs = append(st.reqs, st.checks[i].Request)
		}
		start := time.Now()
		st.outs = snap.single.Guard.AllowAll(ctx, st.reqs, st.outs)
		h.observe(snap.single, start, st.outs)
		return
	}
	// Policies on several Redis servers: one batch per server, in turn.
	st.outs = append(st.outs[:0], make([]limiter.Outcome, len(st.checks))...)
	for _, be := range snap.backends {
		st.reqs, st.index = st.reqs[:0], st.index[:0]
		for i := range st.checks {
			if snap.backendOf[st.checks[i].Policy] == be {
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
func (h *Handler) observe(be *Backend, start time.Time, outs []limiter.Outcome) {
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
func (h *Handler) refund(ctx context.Context, snap *Snapshot, st *requestState) {
	for _, be := range snap.backends {
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
	policyVerdict := Allowed
	for i := range st.checks {
		c, o := &st.checks[i], &st.outs[i]
		v := Allowed
		if refuses(o) {
			v = Denied
			if o.Decision.Ban.Active() {
				v = Banned
			}
			if c.Policy.DryRun {
				v = WouldDeny
			}
		}
		if o.Decision.Degraded {
			h.rec.Degraded(c.Policy)
		}
		h.rec.Check(c.Policy, c.Rule, c.Tier, v)
		policyVerdict = max(policyVerdict, v)
		// Checks come grouped by policy: close the group at its last check.
		if i == len(st.checks)-1 || st.checks[i+1].Policy != c.Policy {
			h.rec.Policy(c.Policy, policyVerdict)
			policyVerdict = Allowed
		}
	}
}
