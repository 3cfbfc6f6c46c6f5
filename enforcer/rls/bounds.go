package rls

import (
	"context"
	"fmt"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Bounds are what one ShouldRateLimit call may ask. A call past one is
// refused whole, before any rule is matched or Redis is asked, so that one
// caller's call cannot take the Redis time that other callers' decisions
// wait for.
type Bounds struct {
	// Descriptors per call: an Envoy route sends one per rate_limits
	// action set, a handful.
	Descriptors int
	// Entries per descriptor: one per action of the set.
	Entries int
	// EntryBytes bounds the key and the value of every entry, each.
	EntryBytes int
	// CallBytes bounds the keys and values of all the call's entries,
	// together.
	CallBytes int
}

// DefaultBounds are far above what any Envoy route sends, and keep the
// largest call they admit a few milliseconds of Redis time.
var DefaultBounds = Bounds{Descriptors: 256, Entries: 32, EntryBytes: 8 << 10, CallBytes: 128 << 10}

// The bounds a call can be past, the bound label of
// sluice_ratelimit_oversized_calls_total.
const (
	boundDescriptors = "descriptors"
	boundEntries     = "entries"
	boundEntryBytes  = "entry_bytes"
	boundCallBytes   = "call_bytes"
)

// Validate says which bound is not a positive number.
func (b Bounds) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{boundDescriptors, b.Descriptors}, {boundEntries, b.Entries}, {boundEntryBytes, b.EntryBytes}, {boundCallBytes, b.CallBytes}} {
		if f.v < 1 {
			return fmt.Errorf("bound %s is %d: it must be at least 1", f.name, f.v)
		}
	}
	return nil
}

// SetBounds says what calls may ask from now on.
func (s *Service) SetBounds(b Bounds) error {
	if err := b.Validate(); err != nil {
		return err
	}
	s.bounds.Store(&b)
	s.large.Store(&largeBudget{sem: semaphore.NewWeighted(int64(b.Descriptors)), size: int64(b.Descriptors)})
	return nil
}

// largeBudget is the descriptors large calls may have in Redis at once.
type largeBudget struct {
	sem  *semaphore.Weighted
	size int64
}

// largeCall is the number of Redis requests past which a call is large:
// Envoy's calls are smaller. Large calls share one budget, the
// descriptors of one maximal call, so that however many of them run at
// once, other callers' decisions wait behind one maximal call at most.
const largeCall = 16

// largeCallWait is how long a large call waits for its share of the
// budget when its caller's deadline is later or unset.
const largeCallWait = time.Second

// boundInFlight is the label of a large call refused for want of budget.
const boundInFlight = "large_calls_in_flight"

// shareOf waits for n units of the large calls' budget, within ctx and
// largeCallWait; the release gives them back. A call of largeCall Redis
// requests or fewer takes none.
func (s *Service) shareOf(ctx context.Context, n int) (release func(), err error) {
	if n <= largeCall {
		return func() {}, nil
	}
	budget := s.large.Load()
	w := min(int64(n), budget.size)
	ctx, cancel := context.WithTimeout(ctx, largeCallWait)
	defer cancel()
	if err := budget.sem.Acquire(ctx, w); err != nil {
		return nil, status.Errorf(codes.ResourceExhausted, "%d descriptors: other large calls are being decided, and a call of more than %d waits for them: try again", n, largeCall)
	}
	return func() { budget.sem.Release(w) }, nil
}

// overBounds is the bound req is past, as its label, and the
// InvalidArgument refusal naming it; nil when req is within b.
// envoyproxy/ratelimit bounds nothing: it decides every descriptor.
func (b *Bounds) overBounds(req *ratelimitv3.RateLimitRequest) (string, error) {
	if n := len(req.Descriptors); n > b.Descriptors {
		return boundDescriptors, status.Errorf(codes.InvalidArgument, "%d descriptors: a call may have at most %d (--max-descriptors)", n, b.Descriptors)
	}
	total := 0
	for i, d := range req.Descriptors {
		if n := len(d.GetEntries()); n > b.Entries {
			return boundEntries, status.Errorf(codes.InvalidArgument, "descriptors[%d]: %d entries: a descriptor may have at most %d (--max-descriptor-entries)", i, n, b.Entries)
		}
		for k, e := range d.GetEntries() {
			if n := max(len(e.GetKey()), len(e.GetValue())); n > b.EntryBytes {
				return boundEntryBytes, status.Errorf(codes.InvalidArgument, "descriptors[%d].entries[%d]: a key or value of %d bytes: at most %d (--max-entry-bytes)", i, k, n, b.EntryBytes)
			}
			total += len(e.GetKey()) + len(e.GetValue())
		}
	}
	if total > b.CallBytes {
		return boundCallBytes, status.Errorf(codes.InvalidArgument, "entries of %d bytes in all: a call may have at most %d (--max-call-bytes)", total, b.CallBytes)
	}
	return "", nil
}
