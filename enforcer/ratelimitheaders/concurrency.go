package ratelimitheaders

// ConcurrentRequests is the quota unit of a limit on requests in flight,
// as the IETF draft names it.
const ConcurrentRequests = "concurrent-requests"

// AppendConcurrencyPolicyItem appends one member of RateLimit-Policy for a
// limit on requests in flight: "<policy>/<rule>";q=<limit>;qu="concurrent-requests".
// It has no w: the quota is not per time window.
func AppendConcurrencyPolicyItem(b []byte, policy, rule string, limit int64) []byte {
	b = AppendName(b, policy, rule)
	b = AppendParam(b, "q", limit)
	b = append(b, ";qu="...)
	return AppendString(b, ConcurrentRequests)
}
