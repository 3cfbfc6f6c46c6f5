// Package admin serves the enforcer's two side listeners. The admin
// listener, on the pod IP: health and readiness probes (which reveal
// nothing), Prometheus metrics, and the /status document the operator
// reads, behind a bearer token; resets and ban lifts behind another. The debug listener, on loopback only: a
// view of a tenant's bucket and, when enabled, Go's profiles. Never expose
// either through a Service open to clients.
package admin

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/debugapi"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/metrics"
	"github.com/sluice-dev/sluice/enforcer/overload"
	"github.com/sluice-dev/sluice/enforcer/reload"
	"github.com/sluice-dev/sluice/enforcer/status"
)

// SnapshotSource gives the configuration in service (the proxy's handler).
type SnapshotSource interface {
	Snapshot() *engine.Snapshot
}

// ReloadSource gives the state of configuration reloads (a *reload.Reloader).
type ReloadSource interface {
	State() reload.State
}

// Options are what the admin listener reports on.
type Options struct {
	Pod status.Pod
	// Upstream is the application URL the proxy forwards to.
	Upstream string
	// Overload bounds what the proxy holds; nil reports nothing.
	Overload  *overload.Shedder
	Version   string
	StartedAt time.Time
	Snapshots SnapshotSource
	// Adaptive gives the adaptive rules' state; nil reports none.
	Adaptive AdaptiveSource
	// Waiting gives the delay queue of the proxy; nil reports no request
	// waiting.
	Waiting WaitingSource
	Reloads ReloadSource
	// Delivery, when set, takes the configurations the manager pushes to
	// PUT /config, behind the write token only.
	Delivery ConfigReceiver
	// Metrics serve /metrics and count the decisions /status reports; nil
	// (a program with metrics of its own) serves no /metrics.
	Metrics *metrics.Metrics
	// Decisions, when set, are the decisions /status reports instead of
	// Metrics' (a rate limit service counts its own).
	Decisions DecisionSource
	// Readiness, when set, is what /readyz and /status say of readiness
	// instead of the enforcer's rule (service.go).
	Readiness func() (bool, string)
	// StatusToken is the read token: a bearer token that grants /status,
	// GET /bans and /debug/tenant, and nothing that changes state.
	StatusToken TokenSource
	// WriteToken grants everything StatusToken does and DELETE /tenant and
	// DELETE /bans. Without it, writes go to TrustedPeers only.
	WriteToken TokenSource
	// TrustedPeers are the exact peer addresses served without a token
	// where no token grants the access asked (authorize). Empty: reads go
	// to 127.0.0.1 and ::1, writes to nobody.
	TrustedPeers []netip.Addr
	// Pprof serves net/http/pprof's profiles under /debug/pprof/ on the
	// debug listener. Off by default: a profile shows internals and costs
	// CPU while it runs.
	Pprof bool
}

// Server holds the handlers of the admin and debug listeners.
type Server struct {
	opts  Options
	mux   *http.ServeMux
	debug http.Handler
}

// New serves /healthz, /readyz, /metrics and /status on the admin handler
// (Server itself), with /bans and /debug/tenant behind the read or write
// token and DELETE /bans and DELETE /tenant behind the write token; and /debug/tenant, with /debug/pprof/ when opts.Pprof is
// set, on Debug for loopback peers.
func New(opts Options) *Server {
	s := &Server{opts: opts, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	if opts.Metrics != nil {
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Metrics.Registry, promhttp.HandlerOpts{
			Registry:          opts.Metrics.Registry,
			EnableOpenMetrics: true,
		}))
	}
	s.mux.HandleFunc("GET "+status.Path, s.authorized(debugapi.Read, s.status))
	s.mux.HandleFunc("GET /bans", s.authorized(debugapi.Read, s.listBans))
	s.mux.HandleFunc("GET /debug/tenant", s.authorized(debugapi.Read, s.debugTenant))
	s.mux.HandleFunc("DELETE /bans", s.authorized(debugapi.Write, s.liftBan))
	s.mux.HandleFunc("DELETE /tenant", s.authorized(debugapi.Write, s.resetTenant))
	if opts.Delivery != nil {
		s.mux.HandleFunc("PUT "+status.ConfigPath, s.pushConfig)
	}

	debug := http.NewServeMux()
	debug.HandleFunc("GET /debug/tenant", s.debugTenant)
	if opts.Pprof {
		debug.HandleFunc("/debug/pprof/", pprof.Index)
		debug.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		debug.HandleFunc("/debug/pprof/profile", pprof.Profile)
		debug.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		debug.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	s.debug = loopbackOnly(debug)
	return s
}

// ServeHTTP serves the admin listener.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Debug is the handler of the debug listener, for loopback peers only: it
// shows tenants' usage and the process's internals.
func (s *Server) Debug() http.Handler { return s.debug }

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	ok, why := s.readiness(s.opts.Snapshots.Snapshot())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write([]byte(why + "\n"))
}

// Status is the current /status document.
func (s *Server) Status() status.Document {
	snap := s.opts.Snapshots.Snapshot()
	st := s.opts.Reloads.State()
	out := status.Document{
		Pod:       s.opts.Pod,
		Upstream:  s.opts.Upstream,
		Version:   s.opts.Version,
		StartedAt: s.opts.StartedAt,
		Config: status.Config{State: configState(st), FileMissing: st.FileMissing, Hash: st.Hash, Revision: st.Revision,
			Pushes: st.Pushes, LoadedAt: st.LoadedAt,
			Reloads: st.Reloads, ReloadErrors: st.Errors, LastReloadError: st.LastError},
		Policies:  []status.Policy{},
		Redis:     []status.Redis{},
		Decisions: s.decisions(),
	}
	out.Ready, _ = s.readiness(snap)
	out.Overload = overloadStatus(s.opts.Overload)
	if st.LastError != "" {
		at := st.LastErrorAt
		out.Config.LastReloadErrorAt = &at
	}
	if snap == nil {
		return out
	}
	out.Config.Namespace = snap.Config.Namespace
	byBackend := map[*engine.Backend][]string{}
	for _, p := range snap.Policies() {
		be := snap.BackendOf(p)
		mode := config.ModeEnforce
		if p.DryRun {
			mode = config.ModeDryRun
		}
		out.Policies = append(out.Policies, status.Policy{Name: p.Name, UID: p.UID, Generation: p.Generation,
			Mode: string(mode), FailureMode: string(p.Failure.Mode), Redis: be.Name})
		byBackend[be] = append(byBackend[be], p.Name)
	}
	for _, be := range snap.Backends() {
		out.Redis = append(out.Redis, redisStatus(be, byBackend[be]))
	}
	s.addAdaptive(&out)
	if s.opts.Metrics != nil {
		out.TopTenants = s.opts.Metrics.TopTenants()
	}
	return out
}

func overloadStatus(o *overload.Shedder) *status.Overload {
	if o == nil {
		return nil
	}
	st, l := o.State(), o.Limits()
	out := &status.Overload{Overloaded: st.Overloaded, InFlight: st.InFlight, MaxInFlight: l.MaxInFlight,
		MaxInFlightPerTenant: l.MaxInFlightPerTenant, Connections: st.Connections, MaxConnections: l.MaxConnections,
		MemoryLimit: l.MemoryLimit, Shed: st.Shed}
	if !st.Since.IsZero() {
		since := st.Since.UTC()
		out.Since = &since
	}
	return out
}

// configState is the /status word for what the configuration in service does.
func configState(st reload.State) string {
	switch {
	case st.Config == nil:
		return status.StateWaiting
	case st.Enforcing():
		return status.StateEnforcing
	default:
		return status.StatePassThrough
	}
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	doc := s.Status()
	s.addActiveBans(r.Context(), &doc)
	writeJSON(w, http.StatusOK, doc)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
