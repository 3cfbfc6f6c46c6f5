package compile

import (
	"time"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

// Defaults of spec.rules[].adaptive, as the CRD states them.
const (
	defaultAdaptiveMinimum  = config.BasisPoints(2500)
	defaultAdaptiveInterval = 10 * time.Second
)

// adaptive is a rule's adaptive settings in the wire format. A percentage
// CEL let through but that does not parse (more than two decimals) becomes
// -1, which config validation reports with its field path.
func adaptive(a *v1alpha1.Adaptive) *config.Adaptive {
	if a == nil {
		return nil
	}
	out := &config.Adaptive{Minimum: defaultAdaptiveMinimum, Interval: config.Duration{Duration: defaultAdaptiveInterval}}
	if a.Target.Latency != nil {
		out.Latency = config.Duration{Duration: a.Target.Latency.Duration}
	}
	if a.Target.ErrorRate != "" {
		out.ErrorRate = percent(a.Target.ErrorRate)
	}
	if a.Minimum != "" {
		out.Minimum = percent(a.Minimum)
	}
	if a.Interval != nil {
		out.Interval = config.Duration{Duration: a.Interval.Duration}
	}
	return out
}

func percent(s string) config.BasisPoints {
	b, err := config.ParsePercent(s)
	if err != nil {
		return -1
	}
	return b
}
