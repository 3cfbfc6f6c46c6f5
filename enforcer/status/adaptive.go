package status

import "time"

// AdaptiveRule is the state of one adaptive rule on an enforcer: the
// factor in force (which every replica reads from Redis) and the
// measurements of the interval that set it, across replicas.
type AdaptiveRule struct {
	Rule string `json:"rule"`
	// Factor is the share of the configured limits in force, in basis
	// points: 10000 is 100%.
	Factor int64 `json:"factor"`
	// Minimum is the rule's lowest factor, in basis points.
	Minimum int64 `json:"minimum"`
	// Limits are the windows of the rule's untiered limits now.
	Limits []AdaptiveLimit `json:"limits"`
	// P90Seconds and ErrorRate (0..1) were measured in the last decided
	// interval, by every replica; Responses counts its responses.
	P90Seconds float64 `json:"p90Seconds"`
	ErrorRate  float64 `json:"errorRate"`
	Responses  int64   `json:"responses"`
	// UpdatedAt is when the enforcer last read the factor from Redis;
	// absent before the first read.
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
	// LastError is why the last read failed; the factor then stays.
	LastError string `json:"lastError,omitempty"`
}

// AdaptiveLimit is one window in force: Requests per Period (a Go
// duration), Burst for the algorithms that have one.
type AdaptiveLimit struct {
	Requests int64  `json:"requests"`
	Period   string `json:"period"`
	Burst    int64  `json:"burst,omitempty"`
}
