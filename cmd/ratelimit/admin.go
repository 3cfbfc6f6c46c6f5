package main

import (
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluice-dev/sluice/enforcer/admin"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/status"
)

// adminOptions are what the service needs to load the operator's policies
// and report on them as an enforcer does.
type adminOptions struct {
	policyConfig    string
	statusTokenFile string
	trustedPeerArgs []string
	trustedPeers    []netip.Addr
	podName, podNS  string
}

func addAdminFlags(fs *pflag.FlagSet, a *adminOptions) {
	fs.StringVar(&a.policyConfig, "policy-config", "", "compiled RateLimitPolicies with a rateLimitService domain (JSON, schema sluice.dev/enforcer-config/v1), as the operator writes them into a ConfigMap: their domains are served beside --config-dir's, and reloaded when the file changes (env SLUICE_POLICY_CONFIG); with it, --config-dir is read only when given or set by RUNTIME_*")
	fs.StringVar(&a.statusTokenFile, "status-token-file", "", "file holding the bearer token GET /status and /debug/tenant on the admin address require (the operator's Secret volume); unset: they serve 127.0.0.1 and ::1 only, or the --admin-trusted-peer addresses (env SLUICE_STATUS_TOKEN_FILE)")
	fs.StringSliceVar(&a.trustedPeerArgs, "admin-trusted-peer", nil, "exact IP addresses served /status and /debug/tenant without a token when --status-token-file is unset (comma-separated or repeated; env SLUICE_ADMIN_TRUSTED_PEER); under a service mesh sidecar remote callers arrive from loopback: use the token file there")
	fs.StringVar(&a.podName, "pod-name", "", "pod name, reported on /status (env POD_NAME, the downward API)")
	fs.StringVar(&a.podNS, "pod-namespace", "", "pod namespace, reported on /status (env POD_NAMESPACE, the downward API)")
}

// adminFromEnv fills the admin flags not given from the environment: the
// enforcer's names for its own flags, the downward API's for the pod; and
// reads the trusted peers.
func adminFromEnv(fs *pflag.FlagSet, a *adminOptions, env func(string) string) error {
	for flag, name := range map[string]string{"policy-config": "SLUICE_POLICY_CONFIG", "status-token-file": "SLUICE_STATUS_TOKEN_FILE",
		"admin-trusted-peer": "SLUICE_ADMIN_TRUSTED_PEER", "pod-name": "POD_NAME", "pod-namespace": "POD_NAMESPACE"} {
		if v := env(name); v != "" && !fs.Changed(flag) {
			if err := fs.Set(flag, v); err != nil {
				return fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	}
	peers, err := admin.ParsePeers(a.trustedPeerArgs)
	if err != nil {
		return fmt.Errorf("--admin-trusted-peer: %w", err)
	}
	a.trustedPeers = peers
	return nil
}

// runtimeEnvSet says whether envoyproxy/ratelimit's variables name a
// folder: with --policy-config, the ERL folder is read only then or with
// --config-dir.
func runtimeEnvSet(env func(string) string) bool {
	return env("RUNTIME_ROOT") != "" || env("RUNTIME_SUBDIRECTORY") != "" || env("RUNTIME_APPDIRECTORY") != ""
}

// snapshots hold the snapshot in service, for the admin server.
type snapshots struct {
	atomic.Pointer[engine.Snapshot]
}

func (s *snapshots) Snapshot() *engine.Snapshot { return s.Load() }

// newAdmin is the enforcer's admin server over the service: /status
// reports the domains' policies, their Redis and decisions in the
// enforcer's document (enforcer/status), behind the same bearer token.
func (s *service) newAdmin() *admin.Server {
	opts := admin.Options{
		Pod:       status.Pod{Name: s.o.admin.podName, Namespace: s.o.admin.podNS},
		Version:   buildVersion(),
		StartedAt: time.Now().UTC(),
		Snapshots: &s.snaps,
		Reloads:   reloads{r: s.reloader, src: s.sources},
		Decisions: s.rls,
		Readiness: s.readiness,
	}
	opts.TrustedPeers = s.o.admin.trustedPeers
	if s.o.admin.statusTokenFile != "" {
		opts.StatusToken = &admin.TokenFile{Path: s.o.admin.statusTokenFile}
	}
	return admin.New(opts)
}

// readiness is what /readyz answers: a configuration is loaded and every
// Redis its domains decide on answers (named by backend: --redis-url's is
// "default", a policy's own is its variable's name, never the URL).
func (s *service) readiness() (bool, string) {
	st := s.reloader.State()
	if s.rls.Table() == nil {
		return false, "no configuration loaded: " + reloads{r: s.reloader, src: s.sources}.State().LastError
	}
	var backends []*engine.Backend
	if snap := s.snaps.Load(); snap != nil {
		backends = snap.Backends()
	}
	if len(backends) == 0 { // no domain yet: --redis-url's, as before
		if be, err := s.backends.Default(); err == nil {
			backends = []*engine.Backend{be}
		}
	}
	var down []string
	for _, be := range backends {
		if h := be.Guard.Health(); !h.Reachable {
			down = append(down, be.Name+": "+h.LastError)
		}
	}
	switch {
	case len(down) == 1 && len(backends) == 1:
		return false, "redis unreachable: " + strings.TrimPrefix(down[0], backends[0].Name+": ")
	case len(down) > 0:
		return false, "redis unreachable: " + strings.Join(down, "; ")
	}
	return true, "ok: config " + st.Hash
}
