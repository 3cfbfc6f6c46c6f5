package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// newLogger writes JSON lines to w. go-redis' own logger (a line per failed
// dial, many per second during an outage) is routed into it at debug level:
// outages are reported by /status, /readyz and the metrics instead.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	l := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
	redis.SetLogger(redisLogger{l.With("component", "redis")})
	return l
}

type redisLogger struct{ log *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if r.log.Enabled(ctx, slog.LevelDebug) {
		r.log.DebugContext(ctx, fmt.Sprintf(format, v...))
	}
}

// stdLogger adapts l for APIs that take a *log.Logger (the reverse proxy's
// and the HTTP servers' error logs: a client gone mid-body, a TLS
// handshake), at debug level: they are per-request events.
func stdLogger(l *slog.Logger, component string) *log.Logger {
	return slog.NewLogLogger(l.With("component", component).Handler(), slog.LevelDebug)
}
