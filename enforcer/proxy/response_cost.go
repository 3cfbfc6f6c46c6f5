package proxy

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/route"
	"github.com/sluice-dev/sluice/enforcer/runtime"
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
	policy  *route.Policy
	rule    *route.Rule
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

func (w *answerWriter) Write(p []byte) (int, error) {
	w.head(http.StatusOK)
	n, err := w.ResponseWriter.Write(p)
	if w.usage != nil && n > 0 {
		w.usage.write(p[:n])
	}
	return n, err
}

func (w *answerWriter) Flush() {
	w.head(http.StatusOK)
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ended is called when the handler has written the whole answer, before
// it returns: it takes the trailers with reported costs out of the answer
// (the server sends what is left after the handler returns) and settles
// the checks in Redis without waiting.
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
	rr, _ := w.h.rec.(runtime.ResponseRecorder)
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
				continue // the cost charged up front stands
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
			if cr.MatchesHTTP(w.status) || grpcCode >= 0 && cr.MatchesGRPC(grpcCode) {
				continue
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
	if header == "" {
		if w.usage == nil {
			return 0, runtime.ReportMissing // no answer was written
		}
		return w.usage.units(field)
	}
	for i, name := range w.costHeaders {
		if name != header {
			continue
		}
		switch v := w.values[i]; len(v) {
		case 0:
			return 0, runtime.ReportMissing
		case 1:
			return headerUnits(v[0])
		default:
			return 0, runtime.ReportMalformed
		}
	}
	return 0, runtime.ReportMissing
}

// headerUnits reads a cost reported in a header: decimal digits, '-'
// before a negative one; no sign, exponent, fraction or base beyond.
func headerUnits(v string) (int64, string) {
	s := strings.Trim(v, " \t")
	if s == "" || s[0] == '+' {
		return 0, runtime.ReportMalformed
	}
	n, err := strconv.ParseInt(s, 10, 64) // [-]digits: no '_' in base 10
	switch {
	case err != nil:
		return 0, runtime.ReportMalformed
	case n < 0:
		return 0, runtime.ReportNegative
	}
	return n, ""
}
