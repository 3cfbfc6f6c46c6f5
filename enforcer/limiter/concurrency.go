package limiter

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// Concurrency limits the requests a tenant has in flight at once, across
// every enforcer sharing Redis: a request takes Cost slots before it is
// forwarded and gives them back when its response ends (Admission.Hold and
// Admission.Release, slots.go).
//
// Its one window is the limit, Requests slots, and the slots' expiry as
// Period: a slot counts in Redis until its enforcer's expiry there passes,
// which the enforcer renews every SlotRenewal while it holds slots of the
// tenant, so an enforcer that dies frees its slots within SlotExpiry.
const Concurrency = config.Concurrency

const (
	// SlotExpiry is how long slots count in Redis after their enforcer last
	// renewed them: an enforcer killed while holding slots frees them
	// within it.
	SlotExpiry = 10 * time.Second
	// SlotRenewal is how often an enforcer renews the slots it holds, in
	// one batch of calls for all of them.
	SlotRenewal = 3 * time.Second
)

var concurrency = algorithm{
	name:      Concurrency,
	code:      "cc",
	script:    newScript("concurrency.lua"),
	args:      concurrencyArgs,
	read:      (*localWindow).readConcurrency,
	answer:    (*localWindow).answerConcurrency,
	refundsAt: true,
}

var renewScript = newScript("concurrency_renew.lua")

// concurrencyArgs is the window's ARGV: concurrent, expiry in ms, and the
// enforcer taking the slots.
func concurrencyArgs(dst []any, w Window) []any {
	return append(windowArgs(dst, w), enforcerID)
}

// ConcurrencyWindow is the limiter's window of a Concurrency limit of n
// slots.
func ConcurrencyWindow(n int64) Window {
	return Window{Requests: n, Period: SlotExpiry}
}

// enforcerID names this process in the tenants' hashes of slots: the host
// name (a pod's name) and a random suffix, so that a restarted enforcer
// never renews or gives back the slots of the one before it.
var enforcerID = func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "enforcer"
	}
	host = strings.NewReplacer("|", "-", "{", "-", "}", "-").Replace(host)
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}()

// EnforcerID is the name under which this process holds slots in Redis.
func EnforcerID() string { return enforcerID }

// Local has no state of slots: a slot must be given back, which a
// window's check cannot do. The guard's LocalFallback for a Concurrency
// rule counts its slots apart (localSlots); these answer a Local.Check
// as a read of an empty set of slots.
func (p *localWindow) readConcurrency(_, cost int64) bool { return cost <= p.requests }

func (p *localWindow) answerConcurrency(now, _ int64, _ bool) (remaining, reset, retry int64) {
	return p.requests, now, 0
}

// localSlots are the slots this enforcer's LocalFallback holds for
// Concurrency rules while Redis is away: each enforcer admits its share of
// the limit (the limit divided among the replicas, rounded down, at least
// the request's cost). They never reach Redis: a request admitted here
// gives back here, so Redis does not count it when it comes back.
type localSlots struct {
	mu sync.Mutex
	m  map[Bucket]int64
}

// share is the slots of a Concurrency window one replica holds on its own.
func (p FailurePolicy) concurrencyShare(w Window, cost int64) int64 {
	return max(w.Requests/int64(max(p.Replicas, 1)), 1, cost)
}

// take decides req on this enforcer alone.
func (l *localSlots) take(req *Request, now time.Time) Decision {
	w := req.Windows[0]
	share := req.Failure.concurrencyShare(w, req.Cost)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[Bucket]int64)
	}
	held := l.m[req.Bucket]
	d := Decision{Limit: share, Period: w.Period, Now: now, Reset: now, CountedAt: now, Degraded: true}
	if held+req.Cost > share {
		d.RetryAfter, d.Reset = time.Second, now.Add(time.Second)
		return d
	}
	l.m[req.Bucket] = held + req.Cost
	d.Allowed, d.Remaining = true, share-held-req.Cost
	return d
}

// give gives back n slots of b.
func (l *localSlots) give(b Bucket, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if left := l.m[b] - n; left > 0 {
		l.m[b] = left
	} else {
		delete(l.m, b)
	}
}

// held is the slots of b held here.
func (l *localSlots) held(b Bucket) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[b]
}
