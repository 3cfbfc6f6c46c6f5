package proxy

import (
	"context"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// settle charges what each responseCost check's answer reported beyond
// its cost (or gives back what it did not use), and gives back the
// countResponses checks whose answer does not count: one batch per Redis.
func (w *answerWriter) settle(grpcCode int) {
	rr, _ := w.h.rec.(engine.ResponseRecorder)
	if w.usage != nil {
		w.usage.finish()
	}
	var adms []limiter.Admission
	// what was charged is recorded once Redis has it
	var recorded []func()
	for i := range w.checks {
		c := &w.checks[i]
		if rc := c.rule.ResponseCost; rc != nil {
			units, reason := w.readReport(rc.Header, rc.JSONUsage)
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
			if units != c.req.Cost {
				c.adm.Charge(units)
				adms = append(adms, c.adm)
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
			c.adm.GiveBack()
			adms = append(adms, c.adm)
		}
	}
	_ = limiter.Settle(context.Background(), adms) // the guards count Redis failures
	for _, record := range recorded {
		record()
	}
}

// readReport reads the cost an answer reported in header, or in usage.<field>
// of its body, or why it cannot be taken.
func (w *answerWriter) readReport(header, field string) (int64, string) {
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
