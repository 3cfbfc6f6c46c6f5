package config

import (
	"strconv"
	"time"
)

// FormatPeriod writes a window's period as people write it: "1m", "24h",
// "1h30m", "500ms".
func FormatPeriod(d time.Duration) string {
	if d <= 0 || d%time.Second != 0 {
		return d.String()
	}
	var out string
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.unit; n > 0 {
			out += strconv.FormatInt(int64(n), 10) + u.name
			d -= n * u.unit
		}
	}
	return out
}
