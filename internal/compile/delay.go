package compile

import (
	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/enforcer/config"
)

// delay compiles a rule's delay (the API's onLimit.delay), resolving
// maxQueued's default; nil (no onLimit, or one without delay) refuses at once.
func delay(o *v1alpha1.OnLimit) *config.OnLimit {
	if o == nil || o.Delay == nil {
		return nil
	}
	d := &config.Delay{Max: config.Duration{Duration: o.Delay.Max.Duration}, MaxQueued: v1alpha1.DefaultDelayMaxQueued}
	if o.Delay.MaxQueued != nil {
		d.MaxQueued = *o.Delay.MaxQueued
	}
	return &config.OnLimit{Delay: d}
}
