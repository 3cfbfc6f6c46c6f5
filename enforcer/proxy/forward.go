package proxy

import (
	"errors"
	"net"
	"net/http"

	"github.com/sluice-dev/sluice/enforcer/transport"
)

// forward hands the admitted request to the application, in the protocol
// of the snapshot's policies. Its answer is measured for adaptive rules;
// for the rules that act on the answer (responseCost, countResponses) it
// is read to its end however the client ends the exchange, and settled
// on every end, a broken-off one included (finish).
func (h *Handler) forward(x *exchange) bool {
	w := measure(x.w, x)
	aw := h.readAnswer(w, x)
	if aw == nil {
		h.send(w, x.r, x.snap, nil)
		return true
	}
	r := x.r
	if aw.wantsUsage {
		offerReadable(r.Header)
	}
	// The enforcer reads the answer's trailers (a reported cost, a gRPC
	// status): it asks for them whether or not the client does.
	r.Header["Te"] = []string{"trailers"}
	ctx, stop := outlive(r.Context())
	x.answer, x.stop = aw, stop
	aw.heads.Private = aw.costHeaders
	h.send(aw, r.WithContext(ctx), x.snap, aw)
	aw.takeUpgrade()
	aw.complete = aw.status != -1 && aw.dropped <= answerDrainBytes
	return true
}

// send passes a request to the application and answers it when the
// exchange fails; aw, when not nil, is the answer writer under w, told
// that the answer is then the enforcer's own.
func (h *Handler) send(w http.ResponseWriter, r *http.Request, snap *inService, aw *answerWriter) {
	protocol := snap.protocol
	if protocol == "" {
		protocol = h.protocol
	}
	var head *transport.AnswerHead
	if aw != nil {
		head = &aw.heads
	}
	err := h.upstream.Forward(w, r, protocol, head)
	if err == nil {
		return
	}
	if aw != nil {
		// what follows is the enforcer's answer to a failed exchange, not
		// the application's; the request may have reached the
		// application unless it could not connect to it
		var op *net.OpError
		aw.own = true
		aw.reached = !errors.As(err, &op) || op.Op != "dial"
	}
	h.answerForwardError(w, r, err)
}
