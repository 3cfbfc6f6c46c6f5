package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/sluice-dev/sluice/enforcer/request"
)

// Problem types (RFC 9457) of the responses the enforcer makes itself.
const (
	// ProblemRateLimited: a rule refused the request (429).
	ProblemRateLimited = "https://sluice.dev/problems/rate-limited"
	// ProblemLimiterUnavailable: Redis could not decide and the policy fails
	// closed (503).
	ProblemLimiterUnavailable = "https://sluice.dev/problems/limiter-unavailable"
	// ProblemUpstreamUnavailable: the application behind the enforcer could
	// not be reached or did not answer (502).
	ProblemUpstreamUnavailable = "https://sluice.dev/problems/upstream-unavailable"
	// ProblemBadRequest: the request could be read otherwise by the
	// application than by the limiter, or is malformed (400).
	ProblemBadRequest = "https://sluice.dev/problems/bad-request"
	// ProblemRequestLimit: the request broke a size or time limit of the
	// enforcer (408, 413).
	ProblemRequestLimit = "https://sluice.dev/problems/request-limit"
	// ProblemUpstreamTimeout: the application sent no response head
	// within the response header timeout (504).
	ProblemUpstreamTimeout = "https://sluice.dev/problems/upstream-timeout"
	// ProblemOverloaded: the enforcer holds as much as its memory allows
	// and refuses new requests until some end (503).
	ProblemOverloaded = "https://sluice.dev/problems/overloaded"
	// ProblemBanned: the tenant kept hitting a rule's limits and is banned
	// from it for a while (429).
	ProblemBanned = "https://sluice.dev/problems/banned"
)

// Problem is an RFC 9457 problem details object, with the extension members
// the enforcer adds.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Policy and Rule name what refused the request.
	Policy string `json:"policy,omitempty"`
	Rule   string `json:"rule,omitempty"`
	// RetryAfter repeats the Retry-After header, in seconds.
	RetryAfter int64 `json:"retryAfter,omitempty"`
	// Debt is what the tenant owes a rule whose answers report their
	// cost, as X-RateLimit-Debt says it.
	Debt int64 `json:"debt,omitempty"`
	// Ban describes the ban of a ProblemBanned answer.
	Ban *BanProblem `json:"ban,omitempty"`
}

// writeProblem answers r with p as application/problem+json, or as a gRPC
// status when r is a gRPC call.
func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	if request.IsGRPC(r) {
		writeGRPCProblem(w, p)
		return
	}
	body, _ := json.Marshal(p) // strings and integers: cannot fail
	h := w.Header()
	h["Content-Type"] = []string{"application/problem+json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	h["Cache-Control"] = []string{"no-store"}
	if p.RetryAfter > 0 {
		h[headerRetryAfter] = []string{strconv.FormatInt(p.RetryAfter, 10)}
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// closeAfter asks the server to close r's connection after this answer:
// what follows on an HTTP/1 connection after a request the enforcer could
// not read cannot be trusted to be framed as the client meant. Not on
// HTTP/2, whose frames stay framed: there it would end every other call
// of the connection.
func closeAfter(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor < 2 {
		w.Header()["Connection"] = []string{"close"}
	}
}
