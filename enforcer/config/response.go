package config

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// ResponseCost charges a request what the application reports it cost:
// Cost up front, the difference when the answer ends. Exactly one of
// Header and JSONUsage is set.
type ResponseCost struct {
	// Header is the canonical name of the response header holding the
	// cost; the enforcer removes it from the answer.
	Header string `json:"header,omitempty"`
	// JSONUsage is the field of usage in an OpenAI-compatible JSON answer.
	JSONUsage string `json:"jsonUsage,omitempty"`
	// UnfinishedCost is charged for an answer whose report could not be
	// read: the answer ended before it (the application broke it off, or
	// kept the enforcer waiting too long after its client had gone), or
	// came in a form the reader cannot read. 0 means the rule's cost.
	UnfinishedCost int64 `json:"unfinishedCost,omitempty"`
}

// Unfinished is what an answer whose report could not be read is
// charged, for a rule of cost cost.
func (rc *ResponseCost) Unfinished(cost int64) int64 {
	return max(rc.UnfinishedCost, cost)
}

// CountResponses counts only the requests whose answer matches: Statuses
// are HTTP codes ("401") or classes ("5xx"), GRPCStatuses gRPC codes.
type CountResponses struct {
	Statuses     []string `json:"statuses,omitempty"`
	GRPCStatuses []int    `json:"grpcStatuses,omitempty"`
}

// GRPCCodes are the gRPC status codes by name, in code order.
var GRPCCodes = []string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
	"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
	"INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
}

// MatchesHTTP reports whether an answer of HTTP status counts.
func (c *CountResponses) MatchesHTTP(status int) bool {
	code := strconv.Itoa(status)
	for _, s := range c.Statuses {
		if s == code || len(code) == 3 && strings.HasSuffix(s, "xx") && s[0] == code[0] {
			return true
		}
	}
	return false
}

// MatchesGRPC reports whether a gRPC call ending with code counts.
func (c *CountResponses) MatchesGRPC(code int) bool {
	for _, g := range c.GRPCStatuses {
		if g == code {
			return true
		}
	}
	return false
}

// answers reports whether the rule acts when the answer comes back.
func (r *Rule) answers() bool { return r.ResponseCost != nil || r.CountResponses != nil }

// validateAnswers checks what r charges from its answers.
func (r *Rule) validateAnswers(path string, add addFunc) {
	if r.ResponseCost != nil && r.CountResponses != nil {
		add(path, "responseCost and countResponses cannot both be set")
	}
	if r.Exempt && r.answers() {
		add(path, "an exempt rule charges nothing for its answers")
	}
	if rc := r.ResponseCost; rc != nil {
		at := path + ".responseCost"
		switch {
		case (rc.Header == "") == (rc.JSONUsage == ""):
			add(at, "must set exactly one of header or jsonUsage")
		case rc.Header != "" && rc.Header != http.CanonicalHeaderKey(rc.Header):
			add(at+".header", "%q must be in canonical form %q", rc.Header, http.CanonicalHeaderKey(rc.Header))
		}
		if r.Algorithm == SlidingWindowLog {
			add(at, "SlidingWindowLog cannot charge a cost after the answer")
		}
		if r.OnLimit != nil {
			add(at, "cannot be combined with onLimit")
		}
		if rc.UnfinishedCost != 0 && rc.UnfinishedCost < r.Cost {
			add(at+".unfinishedCost", "%d is below the rule's cost %d: an unfinished answer is charged at least the cost", rc.UnfinishedCost, r.Cost)
		}
	}
	if c := r.CountResponses; c != nil {
		at := path + ".countResponses"
		if len(c.Statuses) == 0 && len(c.GRPCStatuses) == 0 {
			add(at, "lists no statuses")
		}
		for i, s := range c.Statuses {
			if !validStatus(s) {
				add(fmt.Sprintf("%s.statuses[%d]", at, i), "%q is not a status such as 401 or 5xx", s)
			}
		}
		for i, g := range c.GRPCStatuses {
			if g < 0 || g >= len(GRPCCodes) {
				add(fmt.Sprintf("%s.grpcStatuses[%d]", at, i), "%d is not a gRPC status code", g)
			}
		}
	}
}

func validStatus(s string) bool {
	if len(s) != 3 || s[0] < '1' || s[0] > '5' {
		return false
	}
	if s[1:] == "xx" {
		return true
	}
	return s[1] >= '0' && s[1] <= '9' && s[2] >= '0' && s[2] <= '9'
}

// validateAnswersDomain refuses answer-driven rules in a policy with a
// domain: the rate limit service never sees the application's answers.
func (p *Policy) validateAnswersDomain(path string, add addFunc) {
	if p.Domain == "" {
		return
	}
	for j := range p.Rules {
		if r := &p.Rules[j]; r.answers() {
			add(fmt.Sprintf("%s.rules[%d](%s)", path, j, r.Name), "the rate limit service never sees answers: responseCost and countResponses are for enforcer policies")
		}
	}
}
