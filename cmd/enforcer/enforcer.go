package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/sluice-dev/sluice/enforcer/adaptive"
	"github.com/sluice-dev/sluice/enforcer/admin"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/metrics"
	"github.com/sluice-dev/sluice/enforcer/overload"
	"github.com/sluice-dev/sluice/enforcer/proxy"
	"github.com/sluice-dev/sluice/enforcer/reload"
	"github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/enforcer/transport"
	"github.com/sluice-dev/sluice/internal/listenhint"
	"github.com/sluice-dev/sluice/internal/program"
)

// Health pings keep /readyz and /status current while no request arrives.
const (
	pingInterval = time.Second
	// overloadInterval is how often memory is compared with GOMEMLIMIT.
	overloadInterval = 50 * time.Millisecond
	pingTimeout      = 500 * time.Millisecond
)

// enforcer is the wired program: the proxy, admin and debug listeners,
// the configuration reloader, the Redis backends and the adaptive limits'
// control loop.
type enforcer struct {
	o        *options
	log      *slog.Logger
	backends *engine.Backends
	handler  *proxy.Handler
	adaptive *adaptive.Controller
	overload *overload.Shedder
	reloader *reload.Reloader
	admin    *admin.Server
	proxyLn  net.Listener
	adminLn  net.Listener
	// debugLn is nil when --debug-listen is empty or cannot be bound.
	debugLn net.Listener
	// upstreamNoted makes noteUpstreamPorts speak once.
	upstreamNoted sync.Once
}

func newEnforcer(o *options, lookupEnv func(string) (string, bool), log *slog.Logger) (*enforcer, error) {
	source, err := configSource(o)
	if err != nil {
		return nil, &program.ConfigError{Err: err}
	}
	e := &enforcer{o: o, log: log}
	rec := metrics.NewMetrics(buildVersion())
	e.overload = overload.New(o.limits.overload(overload.SoftMemoryLimit()))
	rec.WatchOverload(e.overload)
	e.backends = engine.NewBackends(o.redisURL, lookupEnv, limiter.ClientOptions{PoolSize: o.redisPoolSize},
		limiter.LocalMaxEntries(o.localFallbackMaxEntries))
	rec.WatchBackends(e.backends.All)
	e.handler = proxy.New(proxy.Options{Upstream: o.upstream, UpstreamProtocol: o.upstreamProtocol, Recorder: rec, ErrorLog: stdLogger(log, "proxy"),
		Limits: o.limits.requests, MaxRequestBody: o.limits.maxRequestBody, ResponseHeaderTimeout: o.limits.responseHeaderTimeout,
		MaxDelayed: o.limits.maxDelayed, Overload: e.overload})
	e.adaptive = adaptive.New(e.handler, log)
	rec.WatchAdaptive(e.adaptive.Reports)
	e.reloader = reload.NewReloader(source, e.apply, rec, log)
	if err := e.reloader.Start(); err != nil {
		e.backends.Close()
		return nil, &program.ConfigError{Err: err}
	}
	adminOpts := admin.Options{
		Pod: status.Pod{Name: o.podName, Namespace: o.podNS}, Version: buildVersion(), StartedAt: time.Now().UTC(),
		Upstream: o.upstream.String(), Overload: e.overload, Snapshots: e.handler, Adaptive: e.adaptive, Waiting: e.handler, Reloads: e.reloader, Metrics: rec, Pprof: o.pprof,
		TrustedPeers: o.trustedPeers,
	}
	if o.statusTokenFile != "" {
		adminOpts.StatusToken = &admin.TokenFile{Path: o.statusTokenFile}
	}
	if o.writeTokenFile != "" {
		adminOpts.WriteToken = &admin.TokenFile{Path: o.writeTokenFile}
	}
	if source.ConfigPath != "" {
		adminOpts.Delivery = e.reloader
	}
	e.admin = admin.New(adminOpts)
	if e.proxyLn, err = net.Listen("tcp", o.listen); err != nil {
		e.backends.Close()
		return nil, fmt.Errorf("proxy listener: %w", listenhint.Explain(err, hintOf("proxy", o.listen, "listen")))
	}
	// HTTP/2 clients' frames coalesced into few writes, under the same
	// bound on a client that reads nothing as the server's.
	e.proxyLn = transport.H2Listener(e.proxyLn, o.limits.requests.WriteIdleTimeout)
	// Past the bound, connections wait in the kernel's listen queue.
	e.proxyLn = netutil.LimitListener(e.proxyLn, e.overload.Limits().MaxConnections)
	if e.adminLn, err = net.Listen("tcp", o.adminListen); err != nil {
		_ = e.proxyLn.Close()
		e.backends.Close()
		return nil, fmt.Errorf("admin listener: %w", listenhint.Explain(err, hintOf("admin", o.adminListen, "admin-listen")))
	}
	if o.debugListen != "" {
		// A port the application took costs the debug view, not the pod.
		if e.debugLn, err = net.Listen("tcp", o.debugListen); err != nil {
			log.Warn("debug listener not served", "error", listenhint.Explain(err, hintOf("debug", o.debugListen, "debug-listen")))
		}
	}
	return e, nil
}

// hintOf is the listener set by flag, for a bind error to name the flag
// and the variable that move it.
func hintOf(name, addr, flag string) listenhint.Listener {
	return listenhint.Listener{Name: name, Addr: addr, Flag: flag, Env: []string{envName(flag)}}
}

// apply puts a loaded configuration into service.
func (e *enforcer) apply(l *reload.Loaded) error {
	cfg := l.ForPod()
	// What the proxy refuses is refused before any Redis is connected.
	if _, err := proxy.UpstreamProtocol(cfg); err != nil {
		return err
	}
	snap, err := engine.NewSnapshot(cfg, e.backends)
	if err != nil {
		return err
	}
	if err := e.handler.Swap(snap); err != nil {
		return err
	}
	// Leases were taken under the old limits: give them back.
	e.backends.Release(context.Background())
	e.noteUpstreamPorts(cfg)
	return nil
}

// proxyServer serves the proxy port: HTTP/1.1 and cleartext HTTP/2 with
// prior knowledge (gRPC) on one port, within the server limits.
func (e *enforcer) proxyServer() *http.Server {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           e.handler,
		Protocols:         protocols,
		HTTP2:             e.o.limits.http2(),
		ReadHeaderTimeout: e.o.limits.readHeaderTimeout,
		IdleTimeout:       e.o.limits.idleTimeout,
		MaxHeaderBytes:    e.o.limits.maxHeaderBytes,
		// "OPTIONS *" goes to the handler, which refuses it, instead of
		// being answered by net/http for the application.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     stdLogger(e.log, "proxy-server"),
		ConnState:                    e.overload.ConnState,
	}
}

// serve runs until ctx ends (SIGTERM), then stops accepting connections and
// lets in-flight requests finish within the shutdown timeout.
func (e *enforcer) Serve(ctx context.Context) error {
	defer e.backends.Close()
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := e.reloader.Watch(runCtx, reload.DefaultDebounce); err != nil {
		return err
	}
	go e.backends.Monitor(runCtx, pingInterval, pingTimeout)
	go e.adaptive.Run(runCtx)
	go e.overload.WatchMemory(runCtx, overloadInterval)

	proxySrv := e.proxyServer()
	adminMux := http.NewServeMux()
	adminMux.Handle("GET "+DrainPath, &drainer{delay: e.o.drainDelay, proxy: proxySrv, log: e.log})
	adminMux.Handle("/", e.admin)
	adminSrv := &http.Server{
		Handler:           adminMux,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          stdLogger(e.log, "admin-server"),
	}
	debugSrv := &http.Server{
		Handler:           e.admin.Debug(),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          stdLogger(e.log, "debug-server"),
	}
	errc := make(chan error, 3)
	go func() { errc <- proxySrv.Serve(e.proxyLn) }()
	go func() { errc <- adminSrv.Serve(e.adminLn) }()
	debugAddr := ""
	if e.debugLn != nil {
		debugAddr = e.debugLn.Addr().String()
		go func() { errc <- debugSrv.Serve(e.debugLn) }()
	}
	e.log.Info("serving", "listen", e.proxyLn.Addr().String(), "admin", e.adminLn.Addr().String(), "debug", debugAddr,
		"statusToken", e.o.statusTokenFile != "", "writeToken", e.o.writeTokenFile != "", "trustedPeers", e.o.trustedPeerArgs, "upstream", e.o.upstream.String(), "version", buildVersion())

	var failed error
	select {
	case <-ctx.Done():
		e.log.Info("shutting down: draining in-flight requests", "timeout", e.o.shutdownTimeout.String())
	case failed = <-errc:
		e.log.Error("listener failed", "error", failed)
	}
	shutdownCtx, done := context.WithTimeout(context.Background(), e.o.shutdownTimeout)
	defer done()
	err := proxySrv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		e.log.Warn("shutdown timeout reached: closing the requests still in flight")
		_ = proxySrv.Close()
	}
	_ = adminSrv.Shutdown(shutdownCtx)
	_ = debugSrv.Shutdown(shutdownCtx)
	e.handler.CloseIdleConnections()
	if failed != nil && !errors.Is(failed, http.ErrServerClosed) {
		return failed
	}
	e.log.Info("stopped")
	return nil
}
