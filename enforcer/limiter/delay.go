package limiter

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// Delay instead of refusal: a rule with a Delay lets a request over its
// limit wait for capacity instead of being refused, when the capacity comes
// within Delay. The wait is a reservation booked in Redis by the same script
// call that decides the request: the token bucket goes into debt by the
// request's cost (its wait is the time until the debt is repaid), GCRA's
// theoretical arrival time moves up to Delay past its tolerance. The units
// are taken now, so nobody else, on any replica, gets them: admissions over
// any interval never exceed what the limit hands out, waiting included.
// Every window of a rule books, or none; the wait is the longest of them.
// A request that would wait longer than Delay is refused as without one,
// taking nothing.
//
// With leases (lease.go) a delay rule stays exact: a lease is only granted
// from capacity that is there now, a reservation is always booked in
// Redis, and a refusal's RetryAfter is the time until a retry would be
// booked (the wait less Delay), so the denial cache never refuses a request
// Redis would have delayed. A reservation given back (its client hung up,
// or another rule refused the request) goes to Redis, never into a lease:
// a lease admits now, and the reservation's units belong to a later time.

// MinDelay and MaxDelay bound a rule's Delay (config.MinDelay, MaxDelay).
const (
	MinDelay = config.MinDelay
	MaxDelay = config.MaxDelay
)

// delayAlgorithm reports whether a's script can book a reservation.
func delayAlgorithm(a Algorithm) bool { return a == TokenBucket || a == GCRA }

// validateDelay reports why a rule of algorithm a cannot delay by longest.
func validateDelay(a Algorithm, longest time.Duration) error {
	if longest == 0 {
		return nil
	}
	if !delayAlgorithm(a) {
		return fmt.Errorf("%w: %s cannot book future capacity: only TokenBucket and GCRA rules delay", ErrInvalidRequest, a)
	}
	if longest < MinDelay || longest > MaxDelay || longest%time.Microsecond != 0 {
		return fmt.Errorf("%w: delay must be a whole number of microseconds between %s and %s, got %s", ErrInvalidRequest, MinDelay, MaxDelay, longest)
	}
	return nil
}

// delays reports whether req may book a reservation.
func (req *Request) delays() bool { return req.f.delay > 0 }

// WithoutDelay is req deciding as a rule without delay: admitted now or
// refused, booking nothing. For a request whose wait queue is full, and for
// DryRun policies, which never hold a request. It does not lease either, so
// its refusal, whose RetryAfter is the full wait, is not cached for the
// requests that may still be delayed.
func (req Request) WithoutDelay() Request {
	if req.f.delay > 0 {
		req.f.delay, req.f.lease = 0, false
	}
	return req
}

// Undelayed is req deciding as its rule does in a DryRun policy, which
// never holds a request: never delayed, every request alike, leases kept.
func (req Request) Undelayed() Request {
	req.f.delay = 0
	return req
}

// reserved completes a decision of a request with a Delay: an admitted one
// waits wait; a refused one's RetryAfter becomes the time after which the
// same request would be booked within Delay instead of refused.
func reserved(req *Request, d *Decision, wait time.Duration) {
	if d.Allowed {
		d.Delay = wait
		return
	}
	d.RetryAfter = max(d.RetryAfter-req.f.delay, 0)
}
