package engine

import "github.com/sluice-dev/sluice/enforcer/rules"

// Reasons a rule's responseCost report is not taken. Missing, malformed
// and negative reports in a whole answer are the application's: the
// request is charged the rule's cost. The others were not the
// application's to give, and are charged the rule's unfinished cost.
const (
	ReportMissing   = "missing"
	ReportMalformed = "malformed"
	ReportNegative  = "negative"
	ReportTooLarge  = "too_large"
	ReportEncoding  = "encoding"
	// ReportUnfinished: the answer ended before its report (broken off,
	// or still going when the enforcer stopped reading for a client gone).
	ReportUnfinished = "unfinished"
)

// ResponseRecorder is told what answers charged (responseCost and
// countResponses); a Recorder that implements it gets the calls.
type ResponseRecorder interface {
	// ResponseCharged records the units an answer reported for a request
	// of a responseCost rule (cost included).
	ResponseCharged(p *rules.Policy, r *rules.Rule, units int64)
	// ResponseReportInvalid records an answer whose report was not taken,
	// for one of the Report reasons.
	ResponseReportInvalid(p *rules.Policy, r *rules.Rule, reason string)
	// ResponseUncounted records a request of a countResponses rule given
	// back because its answer did not match.
	ResponseUncounted(p *rules.Policy, r *rules.Rule)
}
