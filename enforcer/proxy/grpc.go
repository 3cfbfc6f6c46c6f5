package proxy

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// errorDomain names the enforcer in the ErrorInfo of its gRPC answers.
const errorDomain = "sluice.dev"

// grpcCode is the gRPC status of one of the enforcer's own answers, and
// the ErrorInfo reason that says which.
func grpcCode(p *Problem) (code.Code, string) {
	switch p.Type {
	case ProblemRateLimited:
		return code.Code_RESOURCE_EXHAUSTED, "RATE_LIMITED"
	case ProblemBanned:
		return code.Code_RESOURCE_EXHAUSTED, "BANNED"
	case ProblemLimiterUnavailable:
		return code.Code_UNAVAILABLE, "LIMITER_UNAVAILABLE"
	case ProblemUpstreamUnavailable:
		return code.Code_UNAVAILABLE, "UPSTREAM_UNAVAILABLE"
	case ProblemOverloaded:
		return code.Code_UNAVAILABLE, "OVERLOADED"
	case ProblemUpstreamTimeout:
		return code.Code_UNAVAILABLE, "UPSTREAM_TIMEOUT"
	case ProblemBadRequest:
		return code.Code_INVALID_ARGUMENT, "BAD_REQUEST"
	case ProblemRequestLimit:
		if p.Status == http.StatusRequestEntityTooLarge {
			return code.Code_RESOURCE_EXHAUSTED, "REQUEST_TOO_LARGE"
		}
		return code.Code_DEADLINE_EXCEEDED, "REQUEST_TIMEOUT"
	}
	return code.Code_UNKNOWN, "UNKNOWN"
}

// writeGRPCProblem answers a gRPC call with p as a gRPC status, in a
// trailers-only response: HTTP 200 whose one header block carries
// grpc-status, grpc-message and grpc-status-details-bin, a google.rpc.Status
// with the details a client reads with status.FromError: ErrorInfo (which
// answer, which policy and rule), RetryInfo (when to retry) and, for a
// limit, QuotaFailure (the rule that refused). The rate limit headers the
// handler set travel with it as response metadata.
func writeGRPCProblem(w http.ResponseWriter, p *Problem) {
	c, reason := grpcCode(p)
	message := p.Detail
	if message == "" {
		message = p.Title
	}
	st := &spb.Status{Code: int32(c), Message: message}
	info := &errdetails.ErrorInfo{Reason: reason, Domain: errorDomain}
	if p.Policy != "" {
		info.Metadata = map[string]string{"policy": p.Policy, "rule": p.Rule}
	}
	details := []proto.Message{info}
	if p.RetryAfter > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(p.RetryAfter) * time.Second)})
	}
	if p.Type == ProblemRateLimited || p.Type == ProblemBanned {
		details = append(details, &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject:     "policy/" + p.Policy + "/rule/" + p.Rule,
			Description: p.Detail,
		}}})
	}
	for _, d := range details {
		a, err := anypb.New(d)
		if err != nil {
			continue // a message of this package's own: cannot fail
		}
		st.Details = append(st.Details, a)
	}
	bin, _ := proto.Marshal(st) // plain messages: cannot fail

	h := w.Header()
	delete(h, "Content-Length")
	h["Content-Type"] = []string{"application/grpc"}
	if p.RetryAfter > 0 {
		h[headerRetryAfter] = []string{strconv.FormatInt(p.RetryAfter, 10)}
	}
	h["Grpc-Status"] = []string{strconv.Itoa(int(c))}
	h["Grpc-Message"] = []string{encodeGRPCMessage(message)}
	h["Grpc-Status-Details-Bin"] = []string{base64.RawStdEncoding.EncodeToString(bin)}
	w.WriteHeader(http.StatusOK)
}

// encodeGRPCMessage percent-encodes a grpc-message value as the gRPC
// protocol asks: every byte outside printable ASCII, and '%'.
func encodeGRPCMessage(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}
