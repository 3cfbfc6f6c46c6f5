package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/sluice-dev/sluice/enforcer/admin"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/reload"
	"github.com/sluice-dev/sluice/enforcer/rls"
	"github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/listenhint"
	"github.com/sluice-dev/sluice/internal/program"
)

const (
	pingInterval = time.Second
	pingTimeout  = 500 * time.Millisecond
)

// service is the wired program: Redis, the guard, the rate limit service,
// the configuration sources and reloader, the admin server and the
// listeners.
type service struct {
	o        *options
	log      *slog.Logger
	backends *engine.Backends
	rls      *rls.Service
	sources  *sources
	reloader *reload.Reloader
	snaps    snapshots
	admin    *admin.Server
	registry *prometheus.Registry
	health   *health.Server
	// tls is the gRPC listener's, nil for plain gRPC.
	tls *tls.Config

	grpcLn, httpLn, adminLn net.Listener
}

// newService wires the program; lookupEnv finds the Redis URL of a policy
// naming its own (os.LookupEnv outside tests).
func newService(o *options, lookupEnv func(string) (string, bool), log *slog.Logger) (*service, error) {
	s := &service{o: o, log: log, registry: prometheus.NewRegistry(), health: health.NewServer()}
	if o.tls.enabled() {
		cfg, err := o.tls.serverConfig()
		if err != nil {
			return nil, err
		}
		s.tls = cfg
	}
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// A domain decides on --redis-url, unless its policy names the
	// variable holding its own Redis (spec.storage): one backend, so one
	// Guard, per distinct URL, as the enforcer's.
	s.backends = engine.NewBackends(o.redisURL, lookupEnv, limiter.ClientOptions{})
	be, err := s.backends.Default()
	if err != nil {
		return nil, err
	}
	s.rls = rls.NewService(be.Guard, be.Redis(), rls.NewMetrics(s.registry))
	s.rls.SetResponseHeaders(o.headers.parsed)
	if err := s.rls.SetBounds(o.bounds); err != nil {
		s.close()
		return nil, err
	}
	s.sources = newSources(o)
	s.reloader = reload.NewReloader(s.sources.source(), s.apply, newReloadMetrics(s.registry), log)
	if err := s.reloader.Start(); errors.Is(err, errWaiting) {
		log.Warn("no policy configuration yet; waiting for it", "error", err)
	} else if err != nil {
		s.close()
		return nil, &program.ConfigError{Err: err}
	}
	s.admin = s.newAdmin()
	for _, l := range []struct {
		hint listenhint.Listener
		ln   *net.Listener
	}{
		{listenhint.Listener{Name: "gRPC", Addr: o.listen, Flag: "listen", Env: []string{"GRPC_HOST", "GRPC_PORT"}}, &s.grpcLn},
		{listenhint.Listener{Name: "HTTP", Addr: o.httpListen, Flag: "http-listen", Env: []string{"HOST", "PORT"}}, &s.httpLn},
		{listenhint.Listener{Name: "admin", Addr: o.adminListen, Flag: "admin-listen", Env: []string{"DEBUG_HOST", "DEBUG_PORT"}}, &s.adminLn},
	} {
		if l.hint.Addr == "" {
			continue
		}
		if *l.ln, err = net.Listen("tcp", l.hint.Addr); err != nil {
			s.closeListeners()
			s.close()
			return nil, listenhint.Explain(err, l.hint)
		}
	}
	return s, nil
}

func (s *service) closeListeners() {
	for _, ln := range []net.Listener{s.grpcLn, s.httpLn, s.adminLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// close gives back every backend's leases and closes its Redis.
func (s *service) close() { s.backends.Close() }

// apply puts a reading of the sources into service: the domains of both
// parts, and the snapshot /status reports on.
func (s *service) apply(l *reload.Loaded) error {
	p, err := s.sources.take(l.Config)
	if err != nil {
		return err
	}
	// A policy whose Redis variable is unset or not a Redis URL is refused
	// here, naming both, and the configuration in service stays.
	snap, err := engine.NewDomainSnapshot(l.Config, s.backends)
	if err != nil {
		return err
	}
	backendOf := func(p *config.Policy) (*rls.Backend, error) {
		be := snap.DomainBackend(p.Domain)
		if be == nil {
			return nil, fmt.Errorf("internal error: domain %s of policy %s has no Redis backend", p.Domain, p.Name)
		}
		return &rls.Backend{Guard: be.Guard, Redis: be.Redis()}, nil
	}
	if err := s.rls.ApplyAllOn(context.Background(), backendOf, p.configs()...); err != nil {
		return err
	}
	s.snaps.Store(snap)
	s.sources.serve(p)
	return nil
}

// serve runs until ctx ends (SIGTERM), then reports NOT_SERVING, stops
// taking calls and lets those in flight finish within the shutdown timeout.
func (s *service) Serve(ctx context.Context) error {
	defer s.close()
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.reloader.Watch(runCtx, reload.DefaultDebounce); err != nil {
		return err
	}
	go s.backends.Monitor(runCtx, pingInterval, pingTimeout)

	var serverOpts []grpc.ServerOption
	if s.tls != nil {
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(s.tls)))
	}
	srv := grpc.NewServer(serverOpts...)
	ratelimitv3.RegisterRateLimitServiceServer(srv, s.rls)
	healthpb.RegisterHealthServer(srv, s.health)
	reflection.Register(srv)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(ratelimitv3.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)

	admin := &http.Server{Handler: s.adminMux(), ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	errc := make(chan error, 3)
	go func() { errc <- srv.Serve(s.grpcLn) }()
	for _, ln := range []net.Listener{s.httpLn, s.adminLn} {
		if ln != nil {
			go func() { errc <- admin.Serve(ln) }()
		}
	}
	httpAddr := ""
	if s.httpLn != nil {
		httpAddr = s.httpLn.Addr().String()
	}
	s.log.Info("serving", "grpc", s.grpcLn.Addr().String(), "http", httpAddr, "admin", s.adminLn.Addr().String(),
		"tls", s.tls != nil, "configDir", s.o.configDir, "policyConfig", s.o.admin.policyConfig, "statusToken", s.o.admin.statusTokenFile != "", "version", buildVersion())

	var failed error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down: draining calls in flight", "timeout", s.o.shutdownTimeout.String())
	case failed = <-errc:
		s.log.Error("listener failed", "error", failed)
	}
	s.health.Shutdown() // NOT_SERVING: Envoy and probes move away first
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(s.o.shutdownTimeout):
		s.log.Warn("shutdown timeout reached: closing the calls still in flight")
		srv.Stop()
	}
	shutdownCtx, done := context.WithTimeout(context.Background(), time.Second)
	defer done()
	_ = admin.Shutdown(shutdownCtx)
	if failed != nil && !errors.Is(failed, http.ErrServerClosed) && !errors.Is(failed, grpc.ErrServerStopped) {
		return failed
	}
	s.log.Info("stopped")
	return nil
}

// adminMux serves /metrics, /healthz (the process runs), /readyz (a
// configuration is loaded and Redis answers), /healthcheck
// (envoyproxy/ratelimit's: a configuration is loaded), the enforcer's
// /status (admin.go) and /debug/tenant (debug.go), behind /status's token.
func (s *service) adminMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /healthcheck", func(w http.ResponseWriter, _ *http.Request) {
		if s.rls.Table() == nil {
			http.Error(w, "no configuration loaded", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("OK"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := s.readiness()
		if !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, why)
	})
	mux.Handle("GET "+status.Path, s.admin)
	// A bucket's state, read without counting: for the callers of /status.
	mux.Handle("GET /debug/tenant", s.admin.Authorized(http.HandlerFunc(s.debugTenant)))
	return mux
}

// reloadMetrics counts configuration reloads.
type reloadMetrics struct {
	reloads, errors prometheus.Counter
	hash            *prometheus.GaugeVec
}

func newReloadMetrics(reg prometheus.Registerer) *reloadMetrics {
	f := promauto.With(reg)
	m := &reloadMetrics{
		reloads: f.NewCounter(prometheus.CounterOpts{Name: "sluice_ratelimit_config_reloads_total",
			Help: "Configurations put into service, the first included."}),
		errors: f.NewCounter(prometheus.CounterOpts{Name: "sluice_ratelimit_config_reload_errors_total",
			Help: "Loads of the configuration folder that failed; the last good configuration stays."}),
		hash: f.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_ratelimit_config_info",
			Help: "1 for the configuration in service, by hash and number of domains."}, []string{"hash", "domains"}),
	}
	return m
}

func (m *reloadMetrics) Reloaded(hash string, domains int) {
	m.reloads.Inc()
	m.hash.Reset()
	m.hash.WithLabelValues(hash, fmt.Sprint(domains)).Set(1)
}

func (m *reloadMetrics) ReloadFailed()    { m.errors.Inc() }
func (m *reloadMetrics) FileMissing(bool) {}
