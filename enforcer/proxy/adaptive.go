package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/route"
)

// Adaptive limits on the request path: a request admitted by an adaptive
// rule is timed from forwarding to the application's response head, and
// its status counted, in the rule's meter (measure). RunAdaptive sends the
// meters to Redis a few times per interval and puts the shared factor it
// gets back into force; Swap carries factors and meters into a new
// configuration, so that a reload neither lifts a tightened limit nor
// loses measurements.

// adaptiveFlushes is how many times per interval each enforcer sends its
// measurements; the factor any replica sees lags the shared one by at most
// interval/adaptiveFlushes.
const adaptiveFlushes = 4

// adaptiveTimeout bounds one rule's call to Redis.
const adaptiveTimeout = time.Second

// measuringWriter observes the first final response head written through it.
type measuringWriter struct {
	http.ResponseWriter
	start  time.Time
	meters [2]*limiter.Meter
	more   []*limiter.Meter
	done   bool
}

// measure wraps w to measure the response for the adaptive rules of st's
// checks; w itself when none is adaptive.
func measure(w http.ResponseWriter, st *requestState) http.ResponseWriter {
	var mw *measuringWriter
	for i := range st.checks {
		m := st.checks[i].Scaling.Meter()
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

// AdaptiveReport is the adaptive state of one rule on this enforcer.
type AdaptiveReport struct {
	Policy, Rule string
	// Settings are the rule's adaptive settings.
	Settings config.Adaptive
	// Configured are the rule's untiered windows as configured, Effective
	// the ones in force.
	Configured, Effective []limiter.Window
	// State is the last answer from Redis; zero before the first.
	State limiter.AdaptiveState
	// Updated is when State arrived; zero before the first.
	Updated time.Time
	// Err is the last call's error, nil once one succeeds.
	Err error
}

// adaptiveStates are the reports of the rules, by policy/rule.
type adaptiveStates struct {
	mu sync.Mutex
	m  map[string]*AdaptiveReport
}

func (s *adaptiveStates) get(policy, rule string) *AdaptiveReport {
	if s.m == nil {
		s.m = map[string]*AdaptiveReport{}
	}
	k := policy + "/" + rule
	r := s.m[k]
	if r == nil {
		r = &AdaptiveReport{Policy: policy, Rule: rule}
		s.m[k] = r
	}
	return r
}

// AdaptiveReports are the adaptive rules of the configuration in service,
// with their factor and last measurements, sorted by policy and rule.
func (h *Handler) AdaptiveReports() []AdaptiveReport {
	snap := h.snap.Load()
	if snap == nil {
		return nil
	}
	h.adaptive.mu.Lock()
	defer h.adaptive.mu.Unlock()
	var out []AdaptiveReport
	for _, p := range snap.Table.Policies() {
		for _, r := range p.Rules {
			s := snap.Table.Scaling(r)
			a := s.Adaptive()
			if a == nil {
				continue
			}
			rep := *h.adaptive.get(p.Name, r.Name)
			rep.Settings, rep.Effective = *a, s.Windows()
			rep.Configured = r.ConfiguredWindows()
			rep.State.Factor = s.Factor()
			out = append(out, rep)
		}
	}
	slices.SortFunc(out, func(a, b AdaptiveReport) int {
		if a.Policy != b.Policy {
			return compareStrings(a.Policy, b.Policy)
		}
		return compareStrings(a.Rule, b.Rule)
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// adopt carries the adaptive state of the snapshot in service into s.
func (h *Handler) adopt(s *Snapshot) {
	old := h.snap.Load()
	if s == nil || old == nil {
		return
	}
	for _, p := range s.Table.Policies() {
		op := old.Policy(p.Name)
		if op == nil {
			continue
		}
		for _, r := range p.Rules {
			if r.Adaptive == nil {
				continue
			}
			for _, or := range op.Rules {
				if or.Name == r.Name {
					_ = s.Table.Scaling(r).Adopt(old.Table.Scaling(or)) // scaling windows NewRule accepted at 100% cannot fail
				}
			}
		}
	}
}

// RunAdaptive sends each adaptive rule's measurements to Redis
// adaptiveFlushes times per interval and applies the factor Redis returns,
// until ctx ends. A rule whose Redis cannot be reached keeps its factor:
// an outage neither lifts nor tightens its limits.
func (h *Handler) RunAdaptive(ctx context.Context, log *slog.Logger) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	next := map[string]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			h.adaptiveRound(ctx, now, next, log)
		}
	}
}

func (h *Handler) adaptiveRound(ctx context.Context, now time.Time, next map[string]time.Time, log *slog.Logger) {
	snap := h.snap.Load()
	if snap == nil {
		return
	}
	for _, p := range snap.Table.Policies() {
		be := snap.BackendOf(p)
		for _, r := range p.Rules {
			a := r.Adaptive
			if a == nil || be == nil {
				continue
			}
			k := p.Name + "/" + r.Name
			if now.Before(next[k]) {
				continue
			}
			next[k] = now.Add(a.Interval.Duration / adaptiveFlushes)
			h.adaptiveStep(ctx, be, snap.Table.Scaling(r), log)
		}
	}
}

// adaptiveStep sends r's measurements and applies the factor.
func (h *Handler) adaptiveStep(ctx context.Context, be *Backend, r *route.Scaling, log *slog.Logger) {
	m := r.Meter()
	counts := m.Take()
	cctx, cancel := context.WithTimeout(ctx, adaptiveTimeout)
	state, err := be.redis.AdaptiveStep(cctx, r.AdaptiveBucket(), r.Adaptive(), counts)
	cancel()
	b := r.AdaptiveBucket()
	h.adaptive.mu.Lock()
	rep := h.adaptive.get(b.Policy, b.Rule)
	if err != nil {
		rep.Err = err
		h.adaptive.mu.Unlock()
		m.Restore(counts)
		if log != nil {
			log.Warn("adaptive limits: keeping the factor in force", "policy", b.Policy, "rule", b.Rule, "error", err)
		}
		return
	}
	before := r.Factor()
	rep.State, rep.Updated, rep.Err = state, time.Now(), nil
	h.adaptive.mu.Unlock()
	if err := r.SetFactor(state.Factor); err != nil && log != nil {
		log.Error("adaptive limits: cannot apply factor", "policy", b.Policy, "rule", b.Rule, "factor", state.Factor.String(), "error", err)
		return
	}
	if after := r.Factor(); after != before && log != nil {
		log.Info("adaptive limits: factor changed", "policy", b.Policy, "rule", b.Rule,
			"from", before.String(), "to", after.String(), "p90", state.P90.String(), "errorRate", state.ErrorRate())
	}
}

// adaptiveNote tells a refused client that the limit is scaled down.
func adaptiveNote(f config.BasisPoints) string {
	return " The limit is at " + f.String() + " of its configured value while the application is over its health targets."
}
