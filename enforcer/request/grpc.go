package request

import (
	"net/http"
	"strings"
)

// IsGRPC reports whether r is a gRPC call: its content-type is
// application/grpc or application/grpc+<codec>. Such a call is answered
// with a gRPC status, which its client reads, never with an HTTP error
// page, which it cannot.
func IsGRPC(r *http.Request) bool {
	ct := r.Header["Content-Type"]
	if len(ct) != 1 {
		return false
	}
	v := ct[0]
	const prefix = "application/grpc"
	if len(v) < len(prefix) || !strings.EqualFold(v[:len(prefix)], prefix) {
		return false
	}
	rest := v[len(prefix):]
	return rest == "" || rest[0] == '+' || rest[0] == ';'
}

// IsGRPCStream reports whether r is a gRPC call over HTTP/2, the only
// protocol gRPC runs on: such a call may pause as long as it lasts. A
// gRPC content type on HTTP/1.1 buys no such leeway, or any slow client
// could claim it to escape the body timeouts.
func IsGRPCStream(r *http.Request) bool {
	return r.ProtoMajor == 2 && IsGRPC(r)
}
