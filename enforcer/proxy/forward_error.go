package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluice-dev/sluice/enforcer/transport"
)

// The answers for requests that the application did not get, or did not
// answer: the transport returns why (a *transport.ForwardError), the
// proxy answers.

// answerForwardError answers a failed exchange with the application: 408
// when the client's body was too slow, else as upstreamError does.
func (h *Handler) answerForwardError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case transport.BodyTimedOut(r, err):
		h.bodyError(w, r, transport.ErrBodyTimeout)
		return
	case errors.As(err, new(*transport.RequestBodyError)) && !errors.As(err, new(*http.MaxBytesError)):
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
	if errors.Is(err, transport.ErrBodyTimeout) {
		h.rec.Refused("body-timeout")
		writeProblem(w, r, &Problem{Type: ProblemRequestLimit, Title: "Request Timeout", Status: http.StatusRequestTimeout,
			Detail: "The request body did not arrive in time."})
		return
	}
	h.rec.Refused("body-malformed")
	writeProblem(w, r, &Problem{Type: ProblemBadRequest, Title: "Bad Request", Status: http.StatusBadRequest,
		Detail: "The request body ended early or its framing is malformed."})
}

// upstreamError answers for a request that could not be forwarded: 413
// for a body over the limit, 504 when the application sent no response
// head in time, 502 when it could not be reached or gave no usable
// answer or the request was cancelled (a client gone reads nothing).
func (h *Handler) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if transport.Cancelled(err) && errors.Is(err, context.Canceled) {
		// net/http cancels the context when the client hangs up, and also
		// when its connection fails otherwise while the client may still
		// read: answer anyway, or net/http would send 200 for the
		// enforcer. Not the application's failure, so not counted.
		closeAfter(w, r)
		writeProblem(w, r, &Problem{Type: ProblemUpstreamUnavailable, Title: "Bad Gateway", Status: http.StatusBadGateway,
			Detail: "The request was cancelled before the application answered."})
		return
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		h.rec.Refused("body-too-large")
		writeProblem(w, r, &Problem{
			Type:   ProblemRequestLimit,
			Title:  "Content Too Large",
			Status: http.StatusRequestEntityTooLarge,
			Detail: fmt.Sprintf("The request body is over the %d bytes this service accepts.", tooLarge.Limit),
		})
		return
	}
	h.rec.UpstreamError()
	if transport.IsResponseHeaderTimeout(err) {
		writeProblem(w, r, &Problem{
			Type:   ProblemUpstreamTimeout,
			Title:  "Gateway Timeout",
			Status: http.StatusGatewayTimeout,
			Detail: "The application behind the rate limiter did not answer in time.",
		})
		return
	}
	writeProblem(w, r, &Problem{
		Type:   ProblemUpstreamUnavailable,
		Title:  "Bad Gateway",
		Status: http.StatusBadGateway,
		Detail: "The application behind the rate limiter could not be reached or did not answer.",
	})
}

// limitProblem is a request refused for its size.
type limitProblem struct {
	Problem
	reason string
}

// tooLarge refuses a request whose declared body is over limit (when
// positive), before it counts against any rule.
func tooLarge(r *http.Request, limit int64) *limitProblem {
	if limit <= 0 || r.ContentLength <= limit {
		return nil
	}
	return &limitProblem{reason: "body-too-large", Problem: Problem{Type: ProblemRequestLimit, Title: "Content Too Large",
		Status: http.StatusRequestEntityTooLarge,
		Detail: "The request body is over the " + strconv.FormatInt(limit, 10) + " bytes this service accepts."}}
}
