package proxy

import (
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/enforcer/limiter"
)

// Adaptive limits on the request path: a request admitted by an adaptive
// rule is timed from forwarding to the application's response head, and
// its status counted, in the rule's meter. The control loop
// (enforcer/adaptive) sends the meters to Redis and puts the factor into
// force.

// measuringWriter observes the first final response head written through it.
type measuringWriter struct {
	http.ResponseWriter
	start  time.Time
	meters [2]*limiter.Meter
	more   []*limiter.Meter
	done   bool
}

// measure wraps w to measure the response for the adaptive rules of x's
// checks; w itself when none is adaptive.
func measure(w http.ResponseWriter, x *exchange) http.ResponseWriter {
	var mw *measuringWriter
	for i := range x.checks {
		m := x.checks[i].Scaling.Meter()
		if m == nil {
			continue
		}
		if mw == nil {
			mw = &measuringWriter{ResponseWriter: w, start: time.Now()}
		}
		switch {
		case mw.meters[0] == nil:
			mw.meters[0] = m
		case mw.meters[1] == nil:
			mw.meters[1] = m
		default:
			mw.more = append(mw.more, m)
		}
	}
	if mw == nil {
		return w
	}
	return mw
}

func (w *measuringWriter) observe(code int) {
	if w.done || (code >= 100 && code <= 199) {
		return
	}
	w.done = true
	latency := time.Since(w.start)
	for _, m := range w.meters {
		if m != nil {
			m.Observe(latency, code)
		}
	}
	for _, m := range w.more {
		m.Observe(latency, code)
	}
}

func (w *measuringWriter) WriteHeader(code int) {
	w.observe(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *measuringWriter) Write(p []byte) (int, error) {
	w.observe(http.StatusOK)
	return w.ResponseWriter.Write(p)
}

func (w *measuringWriter) Flush() {
	w.observe(http.StatusOK)
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *measuringWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
