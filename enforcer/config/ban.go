package config

import (
	"fmt"
	"time"
)

// Ban bounds, as the API allows them; the wire format also takes whole
// milliseconds below a second.
const (
	MaxBanDenials     = 10000
	MaxBanWithin      = 24 * time.Hour
	MaxBanDurations   = 8
	MaxBanDuration    = 744 * time.Hour
	MaxBanForgetAfter = 744 * time.Hour
)

// Ban shuts a tenant out of its rule for a while: Denials refusals within
// Within start a ban of Durations[level-1] (the last one repeats); a ban
// starting within ForgetAfter of the end of the previous one is one level
// higher.
type Ban struct {
	Denials     int64      `json:"denials"`
	Within      Duration   `json:"within"`
	Durations   []Duration `json:"durations"`
	ForgetAfter Duration   `json:"forgetAfter"`
}

func (b *Ban) validate(path string, add addFunc) {
	if b.Denials < 1 || b.Denials > MaxBanDenials {
		add(path+".denials", "must be between 1 and %d, got %d", MaxBanDenials, b.Denials)
	}
	wholeMs := func(at string, d, most time.Duration) {
		if d < time.Millisecond || d%time.Millisecond != 0 || d > most {
			add(at, "must be a whole number of milliseconds between 1ms and %s, got %s", most, d)
		}
	}
	wholeMs(path+".within", b.Within.Duration, MaxBanWithin)
	if len(b.Durations) == 0 || len(b.Durations) > MaxBanDurations {
		add(path+".durations", "a ban needs 1 to %d durations, got %d", MaxBanDurations, len(b.Durations))
	}
	for i, d := range b.Durations {
		wholeMs(fmt.Sprintf("%s.durations[%d]", path, i), d.Duration, MaxBanDuration)
	}
	wholeMs(path+".forgetAfter", b.ForgetAfter.Duration, MaxBanForgetAfter)
}
