package config

import "time"

// OnLimit says what a rule does with a request over its limit instead of
// refusing it at once.
type OnLimit struct {
	// Delay lets the request wait for capacity booked in Redis; nil refuses
	// it at once.
	Delay *Delay `json:"delay,omitempty"`
}

// Delay is how long a request over a rule's limit may wait for its
// capacity, and how many of one tenant's requests may wait at once in one
// enforcer.
type Delay struct {
	// Max is the longest wait: a request whose capacity comes later is
	// refused as without a delay.
	Max Duration `json:"max"`
	// MaxQueued bounds the tenant's requests of this rule waiting at once
	// in one enforcer; the compiler resolves the API's default.
	MaxQueued int32 `json:"maxQueued"`
}

const (
	// MinDelay and MaxDelay bound Delay.Max: a shorter wait is below what a
	// timer keeps, a longer one holds connections longer than clients and
	// proxies usually wait.
	MinDelay = time.Millisecond
	MaxDelay = 30 * time.Second
	// DefaultDelayMaxQueued is Delay.MaxQueued when the policy sets none.
	DefaultDelayMaxQueued = 100
	// MaxDelayMaxQueued bounds Delay.MaxQueued.
	MaxDelayMaxQueued = 100000
)

// DelayMax is how long the rule's requests over the limit may wait, zero
// when they are refused at once.
func (r *Rule) DelayMax() time.Duration {
	if r.OnLimit == nil || r.OnLimit.Delay == nil {
		return 0
	}
	return r.OnLimit.Delay.Max.Duration
}

// validateDelay checks r's delay (its onLimit.delay): only the algorithms
// that can book future capacity exactly delay.
func (r *Rule) validateDelay(path string, add addFunc) {
	if r.OnLimit == nil || r.OnLimit.Delay == nil {
		return
	}
	path += ".onLimit.delay"
	if r.Exempt {
		add(path, "an exempt rule never limits, so it has nothing to delay")
		return
	}
	// a Concurrency rule's requests wait for a slot of their enforcer's
	if r.Algorithm != TokenBucket && r.Algorithm != GCRA && r.Algorithm != Concurrency {
		add(path, "%s cannot book future capacity exactly: only TokenBucket, GCRA and Concurrency rules delay", r.Algorithm)
	}
	d := r.OnLimit.Delay
	if m := d.Max.Duration; m < MinDelay || m > MaxDelay || m%time.Microsecond != 0 {
		add(path+".max", "must be a whole number of microseconds between %s and %s, got %s", MinDelay, MaxDelay, m)
	}
	if d.MaxQueued < 1 || d.MaxQueued > MaxDelayMaxQueued {
		add(path+".maxQueued", "must be between 1 and %d, got %d", MaxDelayMaxQueued, d.MaxQueued)
	}
}
