package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Adaptive scales a rule's limits by a factor that follows the health of the
// application (latency and 5xx share of the rule's responses), agreed by
// every replica through Redis once per Interval.
type Adaptive struct {
	// Latency is the target p90 from forwarding to the response head; zero
	// means no latency target.
	Latency Duration `json:"latency,omitempty"`
	// ErrorRate is the target share of 5xx responses in basis points
	// (1/10000: 500 is 5%); zero means no error target.
	ErrorRate BasisPoints `json:"errorRate,omitempty"`
	// Minimum is the lowest factor, in basis points (2500 is 25%).
	Minimum BasisPoints `json:"minimum"`
	// Interval is how often the factor may step.
	Interval Duration `json:"interval"`
}

// BasisPoints is a share in ten-thousandths: 10000 is 100%.
type BasisPoints int64

// Full is the factor of a rule applied in full: 100%.
const Full BasisPoints = 10000

// String writes b as a percentage: "25%", "0.5%", "72.1%".
func (b BasisPoints) String() string {
	s := strconv.FormatFloat(float64(b)/100, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + "%"
}

// ParsePercent reads a percentage such as "25%" or "0.5%" into basis
// points; more than two decimals are an error.
func ParsePercent(s string) (BasisPoints, error) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	if !ok || num == "" {
		return 0, fmt.Errorf("%q is not a percentage such as 25%%", s)
	}
	whole, frac, _ := strings.Cut(num, ".")
	if len(frac) > 2 {
		return 0, fmt.Errorf("%q has more than two decimals", s)
	}
	for len(frac) < 2 {
		frac += "0"
	}
	w, err := strconv.ParseInt(whole, 10, 32)
	if err != nil || w < 0 {
		return 0, fmt.Errorf("%q is not a percentage such as 25%%", s)
	}
	f, err := strconv.ParseInt(frac, 10, 32)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%q is not a percentage such as 25%%", s)
	}
	return BasisPoints(w*100 + f), nil
}

// Adaptive bounds, as the API states them.
const (
	AdaptiveMinInterval  = time.Second
	AdaptiveMaxInterval  = 10 * time.Minute
	AdaptiveMinLatency   = time.Millisecond
	AdaptiveMaxLatency   = time.Minute
	AdaptiveMinErrorRate = BasisPoints(10) // 0.1%
	AdaptiveMinMinimum   = BasisPoints(100)
)

func (a *Adaptive) validate(path string, add addFunc) {
	if a.Latency.Duration == 0 && a.ErrorRate == 0 {
		add(path+".target", "needs latency, errorRate or both")
	}
	if d := a.Latency.Duration; d != 0 && (d < AdaptiveMinLatency || d > AdaptiveMaxLatency) {
		add(path+".target.latency", "must be between 1ms and 60s, got %s", d)
	}
	if e := a.ErrorRate; e != 0 && (e < AdaptiveMinErrorRate || e > Full) {
		add(path+".target.errorRate", "must be between 0.1%% and 100%%, got %s", e)
	}
	if a.Minimum < AdaptiveMinMinimum || a.Minimum > Full {
		add(path+".minimum", "must be between 1%% and 100%%, got %s", a.Minimum)
	}
	if d := a.Interval.Duration; d < AdaptiveMinInterval || d > AdaptiveMaxInterval || d%time.Second != 0 {
		add(path+".interval", "must be a whole number of seconds between 1s and 10m, got %s", d)
	}
}
