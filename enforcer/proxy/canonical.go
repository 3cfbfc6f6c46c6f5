package proxy

import (
	"errors"
	"net/http"

	"github.com/sluice-dev/sluice/enforcer/request"
	"github.com/sluice-dev/sluice/enforcer/transport"
)

// readForm reads the body of a short form before deciding: it may ask to
// be routed as another method (_method), and the application will read
// it so.
func (h *Handler) readForm(x *exchange) bool {
	if !transport.IsShortForm(x.r) {
		return true
	}
	w, g := h.limits.Guard(x.w, x.r)
	release, err := transport.BufferBody(x.r)
	g.Done()
	if err != nil {
		h.bodyError(w, x.r, err)
		return false
	}
	x.unbuffer = release
	return true
}

// canonicalize makes the one request the application will receive, which
// the request is decided on, and refuses one the application could read
// otherwise (400) or whose declared body is over the limit (413), before
// it counts against any rule.
func (h *Handler) canonicalize(x *exchange) bool {
	var err error
	if x.req, err = x.snap.Table.Canonicalize(x.r); err != nil {
		h.refuseMalformed(x.w, x.r, err)
		return false
	}
	if p := tooLarge(x.r, h.maxBody); p != nil {
		h.rec.Refused(p.reason)
		writeProblem(x.w, x.r, &p.Problem)
		return false
	}
	return true
}

// collectChecks finds the checks of the rules the request matches, in
// policy order; none means the request goes to the application
// undecided.
func (h *Handler) collectChecks(x *exchange) bool {
	x.checks = x.snap.Table.Checks(&x.req, x.checks[:0])
	return true
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
