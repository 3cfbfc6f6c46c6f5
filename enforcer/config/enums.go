package config

// The enumerations of the wire format. The compiler writes them from the API
// types, Parse refuses any other value, and the data plane switches on these
// constants instead of spelling the strings again.

// Mode says whether a policy refuses requests over a limit.
type Mode string

const (
	// ModeEnforce answers 429 to requests over a limit.
	ModeEnforce Mode = "Enforce"
	// ModeDryRun forwards every request and counts the ones it would refuse.
	ModeDryRun Mode = "DryRun"
)

// Modes lists every Mode.
var Modes = []Mode{ModeEnforce, ModeDryRun}

// UpstreamProtocol is how the enforcer speaks to the application.
type UpstreamProtocol string

const (
	// UpstreamHTTP1 forwards as HTTP/1.1, whatever the client spoke.
	UpstreamHTTP1 UpstreamProtocol = "HTTP1"
	// UpstreamH2C forwards as cleartext HTTP/2 with prior knowledge, what
	// gRPC servers speak.
	UpstreamH2C UpstreamProtocol = "H2C"
)

// UpstreamProtocols lists every UpstreamProtocol.
var UpstreamProtocols = []UpstreamProtocol{UpstreamHTTP1, UpstreamH2C}

// OrDefault is p, or UpstreamHTTP1 when p is empty.
func (p UpstreamProtocol) OrDefault() UpstreamProtocol {
	if p == "" {
		return UpstreamHTTP1
	}
	return p
}

// Leasing says whether a rule's decisions may be made in the enforcer, from
// units it took from Redis ahead of time (a lease) and from refusals Redis
// gave until a known time (the denial cache), or must each go to Redis.
type Leasing string

const (
	// LeasingAuto leases where the algorithm allows it exactly
	// (TokenBucket, GCRA, FixedWindow), sized by each bucket's traffic.
	LeasingAuto Leasing = "Auto"
	// LeasingOff sends every decision to Redis.
	LeasingOff Leasing = "Off"
)

// Leasings lists every Leasing.
var Leasings = []Leasing{LeasingAuto, LeasingOff}

// FailureMode is what a policy decides when Redis cannot answer in time.
type FailureMode string

const (
	// FailOpen admits every request while Redis is unavailable.
	FailOpen FailureMode = "Open"
	// FailClosed refuses every request while Redis is unavailable.
	FailClosed FailureMode = "Closed"
	// FailLocal limits in-process while Redis is unavailable, each replica
	// enforcing its share (limit / replicas) of the limit.
	FailLocal FailureMode = "LocalFallback"
)

// FailureModes lists every FailureMode.
var FailureModes = []FailureMode{FailOpen, FailClosed, FailLocal}

// Consistency says when a decision's count is safe from a Redis failover.
type Consistency string

const (
	// ConsistencyAsync (also the empty value) counts a decision once the
	// primary has it.
	ConsistencyAsync Consistency = "Async"
	// ConsistencyReplicated counts a decision once one replica has it too
	// (Redis WAIT); one no replica acknowledged within the timeout is a
	// Redis failure.
	ConsistencyReplicated Consistency = "Replicated"
)

// Consistencies lists every Consistency.
var Consistencies = []Consistency{ConsistencyAsync, ConsistencyReplicated}

// ResponseHeaders says which rate limit headers responses carry.
type ResponseHeaders string

const (
	// HeadersXRateLimit sends X-RateLimit-Limit, -Remaining and -Reset.
	HeadersXRateLimit ResponseHeaders = "XRateLimit"
	// HeadersIETF sends the RateLimit-Policy and RateLimit fields.
	HeadersIETF ResponseHeaders = "IETF"
	// HeadersBoth sends both sets.
	HeadersBoth ResponseHeaders = "Both"
	// HeadersNone sends no rate limit headers; a 429 still carries Retry-After.
	HeadersNone ResponseHeaders = "None"
)

// ResponseHeaderSets lists every ResponseHeaders.
var ResponseHeaderSets = []ResponseHeaders{HeadersXRateLimit, HeadersIETF, HeadersBoth, HeadersNone}

// XRateLimit reports whether responses carry the X-RateLimit-* headers.
func (h ResponseHeaders) XRateLimit() bool { return h == HeadersXRateLimit || h == HeadersBoth }

// IETF reports whether responses carry the IETF RateLimit fields.
func (h ResponseHeaders) IETF() bool { return h == HeadersIETF || h == HeadersBoth }

// PartitionKey is a request attribute added to the tenant, so each value
// gets a budget of its own.
type PartitionKey string

const (
	PartitionByMethod PartitionKey = "Method"
	PartitionByPath   PartitionKey = "Path"
	PartitionByHost   PartitionKey = "Host"
)

// PartitionKeys lists every PartitionKey.
var PartitionKeys = []PartitionKey{PartitionByMethod, PartitionByPath, PartitionByHost}

// Algorithm is how a rule counts requests. The limiter implements each; the
// wire format only names them and knows which use a burst.
type Algorithm string

const (
	TokenBucket          Algorithm = "TokenBucket"
	SlidingWindowLog     Algorithm = "SlidingWindowLog"
	SlidingWindowCounter Algorithm = "SlidingWindowCounter"
	FixedWindow          Algorithm = "FixedWindow"
	GCRA                 Algorithm = "GCRA"
	// Concurrency limits the requests in flight: its limits set Concurrent
	// instead of Requests and Period (concurrency.go).
	Concurrency Algorithm = "Concurrency"
)

// Algorithms lists the algorithms that count requests per period, every
// Algorithm but Concurrency.
var Algorithms = []Algorithm{TokenBucket, SlidingWindowLog, SlidingWindowCounter, FixedWindow, GCRA}

// AllAlgorithms lists every Algorithm.
var AllAlgorithms = append(Algorithms[:len(Algorithms):len(Algorithms)], Concurrency)

// Capacity is the most a window of algorithm a can ever admit at once: the
// Burst of a token bucket or GCRA when set, a Concurrency limit's
// Concurrent, else Requests.
func (a Algorithm) Capacity(l Limit) int64 {
	if a == Concurrency && l.Concurrent > 0 {
		return l.Concurrent
	}
	if (a == TokenBucket || a == GCRA) && l.Burst > 0 {
		return l.Burst
	}
	return l.Requests
}

// SourceKind names the member a Source sets.
type SourceKind string

const (
	SourceHeader   SourceKind = "header"
	SourceAPIKey   SourceKind = "apiKey"
	SourceJWTClaim SourceKind = "jwtClaim"
	SourceClientIP SourceKind = "clientIP"
	SourceShared   SourceKind = "shared"
	// SourceDescriptor is the rate limit service's: the matched
	// descriptor's entries.
	SourceDescriptor SourceKind = "descriptor"
)

// Kind is the member s sets, or "" unless it sets exactly one.
func (s *Source) Kind() SourceKind {
	kind, n := SourceKind(""), 0
	for _, m := range [...]struct {
		set  bool
		kind SourceKind
	}{
		{s.Header != nil, SourceHeader}, {s.APIKey != nil, SourceAPIKey}, {s.JWTClaim != nil, SourceJWTClaim},
		{s.ClientIP != nil, SourceClientIP}, {s.Shared != nil, SourceShared}, {s.Descriptor != nil, SourceDescriptor},
	} {
		if m.set {
			kind, n = m.kind, n+1
		}
	}
	if n != 1 {
		return ""
	}
	return kind
}
