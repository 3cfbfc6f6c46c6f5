package proxy

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rules"
	"github.com/sluice-dev/sluice/enforcer/transport"
)

// Rules that act when the answer ends (responseCost, countResponses): the
// request was charged the rule's cost when it was admitted; the answer
// says what it really cost, or whether it counts at all. The writer below
// reads the answer as it is copied to the client (the reported header,
// which it removes, the status, the usage of a JSON body), and once the
// handler has written it all, settle charges the difference or gives the
// cost back, in Redis, off the request path.

// answerCheck is an admitted check whose rule acts on the answer.
type answerCheck struct {
	policy *rules.Policy
	rule   *rules.Rule
	req    limiter.Request
	// adm is a copy of the check's admission, to settle on the answer
	// (the request's own releases its slots)
	adm limiter.Admission
}

// answerWriter reads the answer of a request with answerChecks.
type answerWriter struct {
	http.ResponseWriter
	h      *Handler
	checks []answerCheck
	// costHeaders are the headers holding reported costs, as the rules
	// name them, and values what the answer's head had in them.
	costHeaders []string
	values      [][]string
	usage       *usageReader
	wantsUsage  bool
	status      int
	// gone is set once a write to the client failed; dropped counts what
	// it was not sent since.
	gone    bool
	dropped int64
	// own marks the enforcer's own answer (the application gave none
	// usable), reached that the request may have reached the application;
	// complete, that the application's answer was read to its end.
	own, reached bool
	complete     bool
	// head names the reported costs to the transport, which takes them
	// out of the heads it writes itself, and tells of an upgrade.
	heads transport.AnswerHead
}

// readAnswer wraps w to read the answer for x's admitted checks whose
// rule acts on it; nil when there are none.
func (h *Handler) readAnswer(w http.ResponseWriter, x *exchange) *answerWriter {
	var aw *answerWriter
	for i := range x.checks {
		c, o := &x.checks[i], &x.batch.Admissions[i]
		rule := c.Rule
		if rule.ResponseCost == nil && rule.CountResponses == nil {
			continue
		}
		if aw == nil {
			aw = &answerWriter{ResponseWriter: w, h: h}
		}
		// the reported cost is removed from the answer even when it is not
		// settled: it is the enforcer's, never the client's
		if rc := rule.ResponseCost; rc != nil && rc.Header != "" && !contains(aw.costHeaders, rc.Header) {
			aw.costHeaders = append(aw.costHeaders, rc.Header)
		}
		be := x.snap.BackendOf(c.Policy)
		if o.Err != nil || !o.Decision.Allowed || o.Decision.Degraded || be == nil {
			continue // nothing was taken in Redis
		}
		aw.checks = append(aw.checks, answerCheck{policy: c.Policy, rule: rule, req: c.Request, adm: *o})
		if rc := rule.ResponseCost; rc != nil {
			aw.wantsUsage = aw.wantsUsage || rc.JSONUsage != ""
		}
	}
	return aw
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// takeUpgrade takes the 101 of an upgrade, the answer's final head, as
// the transport saw it: its reported costs, which it took out.
func (w *answerWriter) takeUpgrade() {
	if w.heads.Upgraded && w.status == 0 {
		w.take(http.StatusSwitchingProtocols, w.heads.UpgradeFields)
	}
}

// head takes the final response head as it is written.
func (w *answerWriter) head(code int) {
	if w.status != 0 || code >= 100 && code <= 199 {
		return
	}
	if w.own && w.reached {
		// the application may have acted on the request but gave no
		// usable answer: what it answered is unknown, not the enforcer's
		// error
		w.status = -1
		return
	}
	w.take(code, w.Header())
}

// take reads the final response head, code and hdr: its status, the
// reported costs it carries, which it removes, and how to read its body.
func (w *answerWriter) take(code int, hdr http.Header) {
	w.status = code
	w.values = make([][]string, len(w.costHeaders))
	for i, name := range w.costHeaders {
		w.values[i] = hdr[name]
		delete(hdr, name)
		transport.UnannounceTrailer(hdr, name)
	}
	if w.wantsUsage && code != http.StatusSwitchingProtocols { // a tunnel has no JSON body
		w.usage = newUsageReader(hdr["Content-Type"], hdr["Content-Encoding"])
	}
}

func (w *answerWriter) WriteHeader(code int) {
	w.head(code)
	w.ResponseWriter.WriteHeader(code)
}

// Write sends p to the client while it takes it, and reads p for the
// answer's report either way: once the client has gone, the rest of the
// answer is read (and dropped) up to answerDrainBytes, so that hanging up
// does not decide the charge.
func (w *answerWriter) Write(p []byte) (int, error) {
	w.head(http.StatusOK)
	if !w.gone {
		if _, err := w.ResponseWriter.Write(p); err != nil {
			w.gone = true
		}
	}
	if w.gone {
		if w.dropped += int64(len(p)); w.dropped > answerDrainBytes {
			return 0, errDrainOver
		}
	}
	if w.usage != nil {
		w.usage.write(p)
	}
	return len(p), nil
}

func (w *answerWriter) Flush() {
	w.head(http.StatusOK)
	if !w.gone {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// end is called on every end of the exchange, before the handler
// returns or while it unwinds: it takes the trailers with reported costs
// out of the answer (the server sends what is left after the handler
// returns) and settles the checks in Redis without waiting.
func (w *answerWriter) end() {
	hdr := w.Header()
	if w.values == nil {
		w.values = make([][]string, len(w.costHeaders))
	}
	for i, name := range w.costHeaders {
		for _, k := range [...]string{name, http.TrailerPrefix + name} {
			if v, ok := hdr[k]; ok {
				if len(w.values[i]) == 0 {
					w.values[i] = v
				}
				delete(hdr, k)
			}
		}
	}
	grpcCode := -1
	for _, k := range [...]string{"Grpc-Status", http.TrailerPrefix + "Grpc-Status"} {
		if v := hdr[k]; len(v) == 1 {
			if n, err := strconv.Atoi(strings.TrimSpace(v[0])); err == nil {
				grpcCode = n
			}
		}
	}
	if len(w.checks) > 0 {
		go w.settle(grpcCode)
	}
}
