package redistest

import (
	"errors"
	"os"
	"path/filepath"
	"time"
)

// WithClockAt runs the server under libfaketime, its clock starting at
// start when the process starts and advancing in real time from there:
// TIME, key expiry and the log follow it. Restart starts the clock at start
// again. Without libfaketime (`make redis` installs Debian's faketime) the
// server does not start, and the error says how to install it.
func WithClockAt(start time.Time) Option {
	return func(c *config) { c.clockAt = start }
}

// libfaketime and glibc's libc_malloc_debug where Debian and a source
// build of libfaketime install them.
var (
	libfaketimePaths = []string{
		"/usr/lib/*/faketime/libfaketime.so.1",
		"/usr/lib/faketime/libfaketime.so.1",
		"/usr/local/lib/faketime/libfaketime.so.1",
	}
	mallocDebugPaths = []string{
		"/lib/*/libc_malloc_debug.so.0",
		"/usr/lib/*/libc_malloc_debug.so.0",
	}
)

// fakeClockEnv is the environment of a server whose clock starts at start.
//
// Debian's redis-server allocates with jemalloc, which reads the clock
// while libfaketime initialises and makes it give up (its README and
// issue tracker know the clash). glibc's libc_malloc_debug, preloaded
// first, gives the server glibc's malloc instead, as a server built
// without jemalloc has.
func fakeClockEnv(start time.Time) ([]string, error) {
	faketime := firstGlob(libfaketimePaths)
	if faketime == "" {
		return nil, errors.New(`redistest: libfaketime.so.1 is not installed: run "make redis" (hack/ensure-redis.sh) to install Debian's faketime`)
	}
	preload := faketime
	if malloc := firstGlob(mallocDebugPaths); malloc != "" {
		preload = malloc + ":" + faketime
	}
	return append(os.Environ(),
		"LD_PRELOAD="+preload,
		"TZ=UTC", // FAKETIME is read in the local zone
		"FAKETIME=@"+start.UTC().Format(time.DateTime), // "start at", then running
	), nil
}

// firstGlob is the first existing file matching one of patterns, in order.
func firstGlob(patterns []string) string {
	for _, p := range patterns {
		matches, _ := filepath.Glob(p)
		for _, m := range matches {
			if _, err := os.Stat(m); err == nil {
				return m
			}
		}
	}
	return ""
}
