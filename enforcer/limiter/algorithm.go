package limiter

import "github.com/sluice-dev/sluice/enforcer/config"

// Algorithm is how a rule counts requests, the configuration's enum. Each
// one the limiter supports is a descriptor in a file of its own
// (token_bucket.go, ...) next to its script (token_bucket.lua, ...).
type Algorithm = config.Algorithm

// algorithm is everything the limiter knows of one Algorithm, in one place:
//
//   - its Lua script, which decides a check (ARGV[1] = cost >= 0) and refunds
//     an admitted one (ARGV[1] = -cost) over the same KEYS and ARGV;
//   - args, the script's ARGV entries for one window, after the cost;
//   - read and answer, its in-process twin for LocalFallback: the two phases
//     of the script's loops, with the script's arithmetic.
//
// Every general script replies in one shape, {allowed, now_µs, then per
// window remaining, reset_µs, retry_µs}, which parseReply reads and decide
// turns into a Decision; a single-window script may answer its hot path in
// a string instead (singleAnswer). A remaining below zero is how far the window is over
// its limit, which decide reports as a debt for a responseCost rule.
//
// A refund gives back what an admitted decision took when another rule
// refused the same HTTP request: its rules live under other hash tags, so
// they cannot share one script. It is best effort by design: it runs right
// after the decision, and never takes a window below empty or above full.
type algorithm struct {
	name Algorithm
	// code is the algorithm's part of its Redis keys.
	code   string
	script algorithmScript
	// single, when the algorithm has one, decides the rules of one period
	// window without delay or ban (NewRule chooses it, Request.single): the
	// script's work for that shape alone, on the same keys and arguments
	// (less want when it is the cost) and stored state, replying as script
	// or, with singleAnswer, shorter. Peeks and refunds of those rules
	// still run script.
	single algorithmScript
	args   func(dst []any, w Window) []any
	// read is the check phase of one window: it reads the state at now and
	// reports whether cost fits.
	read func(p *localWindow, now, cost int64) bool
	// answer is the reply phase of one window: it commits cost when allowed
	// (into p.entry unless Local is full) and returns remaining, reset (µs)
	// and retry (µs).
	answer func(p *localWindow, now, cost int64, allowed bool) (remaining, reset, retry int64)
	// singleAnswer is set for an algorithm whose single-window script
	// replies "allowed now_µs state taken" rather than script's table (a
	// table costs Redis more than the rest of a short script's work): it
	// returns window w's remaining, reset and retry from state, what the
	// script left in the window after deciding cost at now, by the
	// arithmetic of script (parseSingleReply).
	singleAnswer func(w Window, state string, now, cost int64, allowed bool) (remaining, reset, retry int64, err error)
	// leases is set for the algorithms whose script can take more than a
	// request's cost at once, for an enforcer to admit from locally (a
	// lease, lease.go): those whose state only time frees, so units taken
	// now and spent a little later never admit more than the limit.
	leases bool
	// refundsAt is set for an algorithm whose give-back names the time
	// (µs, Redis' clock) the units were taken at, as a lease's does.
	refundsAt bool
}

// algorithms is the one table of the algorithms that count requests per
// period, in the order of the API's enum; allAlgorithms adds Concurrency
// (concurrency.go), which counts requests in flight.
var algorithms = []*algorithm{&tokenBucket, &slidingWindowLog, &slidingWindowCounter, &fixedWindow, &gcra}

var allAlgorithms = append(algorithms[:len(algorithms):len(algorithms)], &concurrency)

var algorithmsByName = func() map[Algorithm]*algorithm {
	m := make(map[Algorithm]*algorithm, len(allAlgorithms))
	for _, d := range allAlgorithms {
		m[d.name] = d
	}
	return m
}()

// descriptorOf is a's descriptor, nil when the limiter does not support a.
func descriptorOf(a Algorithm) *algorithm {
	return algorithmsByName[a]
}

// code is the short name of a used in Redis keys.
func code(a Algorithm) string {
	if d := descriptorOf(a); d != nil {
		return d.code
	}
	return "unknown"
}

// windowArgs is the usual ARGV of one window: requests, period in ms.
func windowArgs(dst []any, w Window) []any {
	return append(dst, w.Requests, w.Period.Milliseconds())
}
