package proxy

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/rules"
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
	policy  *rules.Policy
	rule    *rules.Rule
	req     limiter.Request
	guard   *limiter.Guard
	counted time.Time
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
}

// answered wraps w to read the answer for st's admitted checks whose rule
// acts on it; nil when there are none.
func (h *Handler) answered(w http.ResponseWriter, snap *inService, st *requestState) *answerWriter {
	var aw *answerWriter
	for i := range st.checks {
		c, o := &st.checks[i], &st.outs[i]
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
		be := snap.BackendOf(c.Policy)
		if o.Err != nil || !o.Decision.Allowed || o.Decision.Degraded || be == nil {
			continue // nothing was taken in Redis
		}
		aw.checks = append(aw.checks, answerCheck{policy: c.Policy, rule: rule, req: c.Request, guard: be.Guard, counted: o.Decision.CountedAt})
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

// FilterHead takes the reported costs out of a head the transport writes
// itself: an informational answer's, which are no report, or the 101 of
// an upgrade, its final head.
func (w *answerWriter) FilterHead(code int, hdr http.Header) {
	if code == http.StatusSwitchingProtocols && w.status == 0 {
		w.take(code, hdr)
		return
	}
	for _, name := range w.costHeaders {
		delete(hdr, name)
	}
}

// take reads the final response head, code and hdr: its status, the
// reported costs it carries, which it removes, and how to read its body.
func (w *answerWriter) take(code int, hdr http.Header) {
	w.status = code
	w.values = make([][]string, len(w.costHeaders))
	for i, name := range w.costHeaders {
		w.values[i] = hdr[name]
		delete(hdr, name)
		unannounce(hdr, name)
	}
	if w.wantsUsage && code != http.StatusSwitchingProtocols { // a tunnel has no JSON body
		w.usage = newUsageReader(hdr["Content-Type"], hdr["Content-Encoding"])
	}
}

// unannounce removes name from the Trailer field, so that the client is
// not told of a trailer it will not get.
func unannounce(hdr http.Header, name string) {
	vv, ok := hdr["Trailer"]
	if !ok {
		return
	}
	var kept []string
	for _, v := range vv {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" && !strings.EqualFold(n, name) {
				kept = append(kept, n)
			}
		}
	}
	if len(kept) == 0 {
		delete(hdr, "Trailer")
		return
	}
	hdr["Trailer"] = []string{strings.Join(kept, ", ")}
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

// ended is called on every end of the exchange, before the handler
// returns or while it unwinds: it takes the trailers with reported costs
// out of the answer (the server sends what is left after the handler
// returns) and settles the checks in Redis without waiting.
func (w *answerWriter) ended() {
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

// settle charges what each responseCost check's answer reported beyond
// its cost (or gives back what it did not use), and gives back the
// countResponses checks whose answer does not count: one batch per Redis.
func (w *answerWriter) settle(grpcCode int) {
	rr, _ := w.h.rec.(engine.ResponseRecorder)
	if w.usage != nil {
		w.usage.finish()
	}
	type batch struct {
		charge, refund        []limiter.Request
		units                 []int64
		chargedAt, refundedAt []time.Time
	}
	batches := make(map[*limiter.Guard]*batch, 1)
	of := func(g *limiter.Guard) *batch {
		b := batches[g]
		if b == nil {
			b = &batch{}
			batches[g] = b
		}
		return b
	}
	// what was charged is recorded once Redis has it
	var recorded []func()
	for i := range w.checks {
		c := &w.checks[i]
		if rc := c.rule.ResponseCost; rc != nil {
			units, reason := w.reported(rc.Header, rc.JSONUsage)
			if reason != "" {
				if rr != nil {
					rr.ResponseReportInvalid(c.policy, c.rule, reason)
				}
				if !unreadable(reason) {
					continue // the application's own report: the cost charged up front stands
				}
				units = rc.Unfinished(c.req.Cost)
			}
			if rr != nil {
				recorded = append(recorded, func() { rr.ResponseCharged(c.policy, c.rule, units) })
			}
			if d := units - c.req.Cost; d != 0 {
				b := of(c.guard)
				b.charge, b.units, b.chargedAt = append(b.charge, c.req), append(b.units, d), append(b.chargedAt, c.counted)
			}
			continue
		}
		if cr := c.rule.CountResponses; cr != nil {
			if !w.answerKnown(cr, grpcCode) || cr.MatchesHTTP(w.status) || grpcCode >= 0 && cr.MatchesGRPC(grpcCode) {
				continue // counted, as is a request whose answer is not known
			}
			if rr != nil {
				recorded = append(recorded, func() { rr.ResponseUncounted(c.policy, c.rule) })
			}
			b := of(c.guard)
			b.refund, b.refundedAt = append(b.refund, c.req), append(b.refundedAt, c.counted)
		}
	}
	ctx := context.Background()
	for g, b := range batches {
		if len(b.charge) > 0 {
			_, _ = g.Charge(ctx, b.charge, b.units, b.chargedAt) // the guard counts Redis failures
		}
		if len(b.refund) > 0 {
			_ = g.Refund(ctx, b.refund, b.refundedAt)
		}
	}
	for _, record := range recorded {
		record()
	}
}

// reported is the cost an answer reported in header, or in usage.<field>
// of its body, or why it cannot be taken.
func (w *answerWriter) reported(header, field string) (int64, string) {
	units, reason := w.report(header, field)
	if reason != "" && !w.complete {
		// the report may have been in what never came
		return 0, engine.ReportUnfinished
	}
	return units, reason
}

// unreadable reports whether a report that could not be taken is charged
// as an unfinished answer: it was not the application's to give.
func unreadable(reason string) bool {
	switch reason {
	case engine.ReportUnfinished, engine.ReportEncoding, engine.ReportTooLarge:
		return true
	}
	return false
}

// answerKnown reports whether what the application answered is known well
// enough to tell whether it counts under cr: its status, and for a rule
// counting gRPC statuses, the call's grpc-status unless the answer ended
// without one. CANCELLED and DEADLINE_EXCEEDED are the client's doing
// (a reset, a grpc-timeout), not what the application found: unknown.
func (w *answerWriter) answerKnown(cr *config.CountResponses, grpcCode int) bool {
	switch {
	case w.status <= 0, grpcCode == grpcCancelled, grpcCode == grpcDeadlineExceeded:
		return false
	}
	return len(cr.GRPCStatuses) == 0 || grpcCode >= 0 || w.complete
}

const grpcCancelled, grpcDeadlineExceeded = 1, 4

func (w *answerWriter) report(header, field string) (int64, string) {
	if header == "" {
		if w.usage == nil {
			return 0, engine.ReportMissing // no answer was written
		}
		return w.usage.units(field)
	}
	for i, name := range w.costHeaders {
		if name != header {
			continue
		}
		switch v := w.values[i]; len(v) {
		case 0:
			return 0, engine.ReportMissing
		case 1:
			return headerUnits(v[0])
		default:
			return 0, engine.ReportMalformed
		}
	}
	return 0, engine.ReportMissing
}

// headerUnits reads a cost reported in a header: decimal digits, '-'
// before a negative one; no sign, exponent, fraction or base beyond.
func headerUnits(v string) (int64, string) {
	s := strings.Trim(v, " \t")
	if s == "" || s[0] == '+' {
		return 0, engine.ReportMalformed
	}
	n, err := strconv.ParseInt(s, 10, 64) // [-]digits: no '_' in base 10
	switch {
	case err != nil:
		return 0, engine.ReportMalformed
	case n < 0:
		return 0, engine.ReportNegative
	}
	return n, ""
}
