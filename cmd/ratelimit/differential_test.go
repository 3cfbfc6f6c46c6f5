package main

import (
	"fmt"
	"math"
	"testing"
	"time"

	ratelimitv3common "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-dev/sluice/enforcer/rls"
	"github.com/sluice-dev/sluice/internal/testing/erlpeer"
	"github.com/sluice-dev/sluice/internal/testing/redistest"
)

// peerConfig is one file both services load as it is: envoyproxy/ratelimit
// refuses a file with Sluice's own keys, so it has none.
const peerConfig = `domain: peer
descriptors:
  - {key: per_second, rate_limit: {unit: second, requests_per_unit: 3}}
  - {key: per_minute, rate_limit: {unit: minute, requests_per_unit: 4}}
  - {key: per_hour, rate_limit: {unit: hour, requests_per_unit: 5}}
  - {key: per_day, rate_limit: {unit: day, requests_per_unit: 6}}
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 2}
    descriptors:
      - {key: plan, value: gold, rate_limit: {unit: hour, requests_per_unit: 4}}
      - {key: plan, rate_limit: {unit: hour, requests_per_unit: 3}}
  - key: tenant
    value: acme
    descriptors:
      - {key: plan, rate_limit: {unit: hour, requests_per_unit: 1}}
  - {key: path, value: /health, rate_limit: {unlimited: true}}
  - {key: path, value: "/v1/*", rate_limit: {unit: hour, requests_per_unit: 2}}
  - {key: path, value: "/files/*", share_threshold: true, rate_limit: {unit: hour, requests_per_unit: 2}}
  - {key: remote_address, rate_limit: {unit: hour, requests_per_unit: 1, name: per-ip}}
  - {key: user, rate_limit: {unit: hour, requests_per_unit: 3, name: per-user, replaces: [{name: per-ip}]}}
  - {key: shadow, shadow_mode: true, rate_limit: {unit: hour, requests_per_unit: 1}}
  - {key: batch, rate_limit: {unit: hour, requests_per_unit: 5}}
  - {key: wide, rate_limit: {unit: hour, requests_per_unit: 3}}
  - {key: narrow, rate_limit: {unit: hour, requests_per_unit: 1}}
`

// peerCall is one ShouldRateLimit call of a sequence.
type peerCall struct {
	hits uint32 // the call's hits_addend
	ds   []*ratelimitv3common.RateLimitDescriptor
}

func callOf(ds ...*ratelimitv3common.RateLimitDescriptor) peerCall { return peerCall{ds: ds} }

func (c peerCall) times(n int) []peerCall {
	out := make([]peerCall, n)
	for i := range out {
		out[i] = c
	}
	return out
}

// withHits is d with its own hits_addend.
func withHits(d *ratelimitv3common.RateLimitDescriptor, hits uint64) *ratelimitv3common.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(hits)
	return d
}

// peers are envoyproxy/ratelimit and sluice-ratelimit, each with a Redis of
// its own, on the same configuration folder.
type peers struct {
	erl, sluice ratelimitv3.RateLimitServiceClient
}

func startPeers(t *testing.T, files map[string]string) *peers {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		writeFile(t, dir, name, content)
	}
	peer := erlpeer.Start(t, redistest.Start(t).Addr(), dir)
	client, err := peer.Client()
	if err != nil {
		t.Fatal(err)
	}
	return &peers{erl: client, sluice: startProgram(t, dir, redistest.Start(t).URL()).client}
}

// both sends c to both services, envoyproxy/ratelimit first.
func (p *peers) both(t *testing.T, domain string, c peerCall) (fromERL, fromSluice *ratelimitv3.RateLimitResponse) {
	t.Helper()
	req := &ratelimitv3.RateLimitRequest{Domain: domain, Descriptors: c.ds, HitsAddend: c.hits}
	var err error
	if fromERL, err = shouldRateLimit(p.erl, req); err != nil {
		t.Fatalf("envoyproxy/ratelimit: %v", err)
	}
	if fromSluice, err = shouldRateLimit(p.sluice, req); err != nil {
		t.Fatalf("sluice-ratelimit: %v", err)
	}
	return fromERL, fromSluice
}

// awayFromBoundary waits, when the current window of period ends within
// margin, until just after it: both services count in fixed windows
// aligned on the Unix epoch, and a sequence that straddled a boundary
// would count in two windows, each service splitting it at its own call.
func awayFromBoundary(period, margin time.Duration) {
	if left := period - time.Duration(time.Now().UnixNano())%period; left < margin {
		time.Sleep(left + 5*time.Millisecond)
	}
}

// expectSameAnswer holds sluice-ratelimit's answer to envoyproxy/ratelimit's:
// the codes, the limit of each descriptor, what an admitted descriptor has
// left (but in a refused call of several descriptors, where Sluice gives
// back what the others took) and, within a second, when its window
// resets. A refused descriptor has 0 left in ERL's answer, and what its
// bucket holds in Sluice's (TestWhereSluiceDiffersFromEnvoyRatelimit).
func expectSameAnswer(g Gomega, where string, fromERL, fromSluice *ratelimitv3.RateLimitResponse) {
	g.Expect(fromSluice.OverallCode).To(Equal(fromERL.OverallCode), "%s: overall code", where)
	g.Expect(fromSluice.Statuses).To(HaveLen(len(fromERL.Statuses)), where)
	refusedWithOthers := fromERL.OverallCode == overLimit && len(fromERL.Statuses) > 1
	for i, e := range fromERL.Statuses {
		s := fromSluice.Statuses[i]
		at := fmt.Sprintf("%s: descriptor %d", where, i)
		g.Expect(s.Code).To(Equal(e.Code), "%s: code", at)
		if e.CurrentLimit == nil {
			g.Expect(s.CurrentLimit).To(BeNil(), "%s: no limit", at)
		} else {
			g.Expect(s.CurrentLimit).NotTo(BeNil(), "%s: a limit", at)
			g.Expect(s.CurrentLimit.RequestsPerUnit).To(Equal(e.CurrentLimit.RequestsPerUnit), "%s: requests_per_unit", at)
			g.Expect(s.CurrentLimit.Unit).To(Equal(e.CurrentLimit.Unit), "%s: unit", at)
			g.Expect(s.DurationUntilReset.AsDuration()).To(BeNumerically("~", e.DurationUntilReset.AsDuration(), 1100*time.Millisecond),
				"%s: duration_until_reset (envoyproxy/ratelimit's is in whole seconds)", at)
		}
		if e.Code == ok && !refusedWithOthers {
			g.Expect(s.LimitRemaining).To(Equal(e.LimitRemaining), "%s: limit_remaining", at)
		}
	}
}

// TestSameAnswersAsEnvoyRatelimit sends the same calls to
// envoyproxy/ratelimit and to sluice-ratelimit, on the same file, each
// with its own Redis, and expects the same answers.
func TestSameAnswersAsEnvoyRatelimit(t *testing.T) {
	p := startPeers(t, map[string]string{"peer.yaml": peerConfig})
	const domain = "peer"
	sequences := []struct {
		name   string
		period time.Duration // the longest-lived window the calls count in
		calls  []peerCall
	}{
		{"a limit per second", time.Second, callOf(desc("per_second", "a")).times(4)},
		{"a limit per minute", time.Minute, callOf(desc("per_minute", "a")).times(5)},
		{"a limit per hour", time.Hour, callOf(desc("per_hour", "a")).times(6)},
		{"a limit per day", 24 * time.Hour, callOf(desc("per_day", "a")).times(7)},
		{"a nested value", time.Hour, callOf(desc("tenant", "t1", "plan", "gold")).times(5)},
		{"a nested key, any value", time.Hour, callOf(desc("tenant", "t1", "plan", "silver")).times(4)},
		{"the parent alone", time.Hour, callOf(desc("tenant", "t1")).times(3)},
		{"the most specific match: the exact value first", time.Hour, callOf(desc("tenant", "acme", "plan", "gold")).times(2)},
		{"a node without a limit", time.Hour, callOf(desc("tenant", "acme")).times(2)},
		{"more entries than the tree", time.Hour, callOf(desc("tenant", "t1", "plan", "gold", "extra", "x")).times(2)},
		{"a wildcard value", time.Hour, append(callOf(desc("path", "/v1/a")).times(3), callOf(desc("path", "/v1/b")))},
		{"a wildcard sharing its threshold", time.Hour, []peerCall{callOf(desc("path", "/files/a")), callOf(desc("path", "/files/b")), callOf(desc("path", "/files/c"))}},
		{"a value no wildcard matches", time.Hour, callOf(desc("path", "/v2/a")).times(2)},
		{"unlimited", time.Hour, callOf(desc("path", "/health")).times(3)},
		{"replaces", time.Hour, append(callOf(desc("remote_address", "10.0.0.1"), desc("user", "ann")).times(4), callOf(desc("remote_address", "10.0.0.1")).times(2)...)},
		{"shadow_mode", time.Hour, callOf(desc("shadow", "x")).times(3)},
		{"the call's hits_addend", time.Hour, []peerCall{{hits: 2, ds: []*ratelimitv3common.RateLimitDescriptor{desc("batch", "call")}}, {hits: 2, ds: []*ratelimitv3common.RateLimitDescriptor{desc("batch", "call")}}, {hits: 2, ds: []*ratelimitv3common.RateLimitDescriptor{desc("batch", "call")}}}},
		{"a descriptor's hits_addend", time.Hour, []peerCall{callOf(withHits(desc("batch", "own"), 4)), {hits: 3, ds: []*ratelimitv3common.RateLimitDescriptor{withHits(desc("batch", "own"), 0)}}, callOf(withHits(desc("batch", "own"), 1))}},
		{"no rule matches", time.Hour, callOf(desc("color", "red")).times(2)},
		{"several descriptors, all admitted", time.Hour, callOf(desc("per_hour", "many"), desc("path", "/health"), desc("color", "red"), desc("tenant", "t2", "plan", "gold")).times(2)},
	}
	for _, seq := range sequences {
		g := NewWithT(t)
		awayFromBoundary(seq.period, min(seq.period*7/10, 3*time.Second))
		for i, c := range seq.calls {
			fromERL, fromSluice := p.both(t, domain, c)
			expectSameAnswer(g, fmt.Sprintf("%s, call %d", seq.name, i+1), fromERL, fromSluice)
		}
	}

	g := NewWithT(t)
	fromERL, fromSluice := p.both(t, "no-such-domain", callOf(desc("per_hour", "a")))
	expectSameAnswer(g, "an unknown domain", fromERL, fromSluice)
	g.Expect(fromSluice.OverallCode).To(Equal(ok))
	fromERL, fromSluice = p.both(t, domain, callOf(desc("path", "/health")))
	g.Expect(fromERL.Statuses[0].LimitRemaining).To(Equal(uint32(math.MaxUint32)), "the sequences ran against a working peer")
	g.Expect(fromSluice.Statuses[0].LimitRemaining).To(Equal(uint32(math.MaxUint32)))
}

// TestWhereSluiceDiffersFromEnvoyRatelimit holds the differences Sluice
// means to have, each asserted as it is rather than as equal.
func TestWhereSluiceDiffersFromEnvoyRatelimit(t *testing.T) {
	g := NewWithT(t)
	p := startPeers(t, map[string]string{"peer.yaml": peerConfig})
	const domain = "peer"
	awayFromBoundary(time.Hour, 3*time.Second)
	type answer struct {
		code      ratelimitv3.RateLimitResponse_Code
		remaining uint32 // of the descriptor watched
	}
	expect := func(where string, c peerCall, watched int, erlWants, sluiceWants answer) {
		t.Helper()
		fromERL, fromSluice := p.both(t, domain, c)
		g.Expect(answer{fromERL.OverallCode, fromERL.Statuses[watched].LimitRemaining}).To(Equal(erlWants), "envoyproxy/ratelimit: %s", where)
		g.Expect(answer{fromSluice.OverallCode, fromSluice.Statuses[watched].LimitRemaining}).To(Equal(sluiceWants), "sluice-ratelimit: %s", where)
	}

	// A refused call consumes nothing from its other descriptors: ERL
	// counts every descriptor of a call, refused or not (reported as
	// envoyproxy/ratelimit#1060; its STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
	// only stops counting once a key is already over its limit).
	both := callOf(desc("wide", "a"), desc("narrow", "a"))
	wide := callOf(desc("wide", "a"))
	expect("the first call of two descriptors", both, 0, answer{ok, 2}, answer{ok, 2})
	expect("narrow refuses: wide keeps what the call took in ERL, gives it back in Sluice", both, 0, answer{overLimit, 1}, answer{overLimit, 2})
	expect("wide alone", wide, 0, answer{ok, 0}, answer{ok, 1})
	expect("wide alone, again: ERL counted the refused call", wide, 0, answer{overLimit, 0}, answer{ok, 0})
	expect("wide alone, past its limit in both", wide, 0, answer{overLimit, 0}, answer{overLimit, 0})

	// A refused descriptor consumes nothing itself: ERL adds the hits of
	// a refused call to its count, so a smaller call that fits the limit
	// is refused after it. Refusing, Sluice reports what the bucket has
	// left; ERL reports 0.
	batch := func(hits uint32) peerCall {
		return peerCall{hits: hits, ds: []*ratelimitv3common.RateLimitDescriptor{desc("batch", "refused")}}
	}
	expect("3 of 5", batch(3), 0, answer{ok, 2}, answer{ok, 2})
	expect("3 more: over the limit in both", batch(3), 0, answer{overLimit, 0}, answer{overLimit, 2})
	expect("2 more fit what is left in Sluice; ERL counted the 3 refused", batch(2), 0, answer{overLimit, 0}, answer{ok, 0})

	// hits_addend 0 on a descriptor checks without counting: Sluice
	// answers whether one more hit would pass, so a bucket with nothing
	// left is OVER_LIMIT; ERL compares the count to the limit without
	// adding, so a bucket exactly at its limit is OK.
	probe := callOf(withHits(desc("batch", "probe"), 0))
	one := callOf(desc("batch", "probe"))
	expect("a check of an empty bucket", probe, 0, answer{ok, 5}, answer{ok, 5})
	for i := range 5 {
		expect(fmt.Sprintf("hit %d of 5", i+1), one, 0, answer{ok, uint32(4 - i)}, answer{ok, uint32(4 - i)})
	}
	expect("a check of a bucket at its limit", probe, 0, answer{ok, 0}, answer{overLimit, 0})

	// A call past a bound (one descriptor more than --max-descriptors) is
	// refused with INVALID_ARGUMENT before anything is decided; ERL decides
	// every descriptor of any call. A call it refuses (an empty list) is
	// answered with an error without a code: UNKNOWN.
	many := make([]*ratelimitv3common.RateLimitDescriptor, rls.DefaultBounds.Descriptors+1)
	for i := range many {
		many[i] = desc("color", fmt.Sprint(i))
	}
	fromERL, err := shouldRateLimit(p.erl, &ratelimitv3.RateLimitRequest{Domain: domain, Descriptors: many})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fromERL.Statuses).To(HaveLen(len(many)))
	_, err = shouldRateLimit(p.sluice, &ratelimitv3.RateLimitRequest{Domain: domain, Descriptors: many})
	g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument))
	_, err = shouldRateLimit(p.erl, &ratelimitv3.RateLimitRequest{Domain: domain})
	g.Expect(status.Code(err)).To(Equal(codes.Unknown))
	_, err = shouldRateLimit(p.sluice, &ratelimitv3.RateLimitRequest{Domain: domain})
	g.Expect(status.Code(err)).To(Equal(codes.InvalidArgument))
}
