// Package fleet simulates, in one process, the enforcer sidecars of many
// pods for the scale suite: each pod the API server shows with an injected
// enforcer and an IP gets a listener on that IP (127.x.y.z: Linux routes
// all of 127.0.0.0/8 to lo) at its sluice-admin port, served by the
// enforcer's own admin handler (enforcer/admin: /status, /readyz, the
// bearer token check) over the enforcer's own reloader (enforcer/reload)
// and snapshots (enforcer/engine). What a pod does not need for the
// control plane is left out: no proxy, no metrics registry per pod, and one
// Redis client for all of them, whose one ping a second is the health every
// /status reports.
//
// Configuration delivery is modelled as a kubelet that refreshes a
// ConfigMap volume as soon as the API server tells it of a change: when
// the namespace's sluice-enforcer-config changes, the fleet parses it once
// and every enforcer of the namespace reloads it (its labels from a
// downward API file of its own). A real kubelet adds its sync period and
// cache TTL (up to about a minute and a half with the defaults) on top.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/enforcer/admin"
	"github.com/sluice-dev/sluice/enforcer/config"
	"github.com/sluice-dev/sluice/enforcer/engine"
	"github.com/sluice-dev/sluice/enforcer/limiter"
	"github.com/sluice-dev/sluice/enforcer/reload"
	"github.com/sluice-dev/sluice/enforcer/status"
	"github.com/sluice-dev/sluice/internal/inject"
	"github.com/sluice-dev/sluice/internal/wellknown"
)

// Fleet is the simulated enforcers.
type Fleet struct {
	// Refresh is whether a ConfigMap's change reaches the running
	// enforcers (the kubelet's volume refresh, at once); without it only
	// the manager's pushes do, and the ConfigMap is read at a pod's start.
	Refresh bool

	dir      string
	backends *engine.Backends
	log      *slog.Logger

	mu         sync.Mutex
	enforcers  map[types.UID]*enforcer
	namespaces map[string]*namespace
	// applied is signalled whenever some enforcer put a configuration into service.
	applied chan struct{}
}

// namespace is what the enforcers of one namespace share: the compiled
// configuration of its ConfigMap, parsed once, and its /status token.
type namespace struct {
	config     atomic.Pointer[config.Config]
	hash       atomic.Pointer[string]
	token      secretToken
	writeToken secretToken
}

// secretToken is a token of one of the namespace's admin Secrets (admin.TokenSource).
type secretToken struct{ value atomic.Pointer[string] }

func (s *secretToken) Token() (string, error) {
	if t := s.value.Load(); t != nil && *t != "" {
		return *t, nil
	}
	return "", errors.New("the admin Secret is not there yet")
}

// enforcer is one pod's simulated sidecar.
type enforcer struct {
	pod      types.NamespacedName
	addr     string
	reloader *reload.Reloader
	snap     atomic.Pointer[engine.Snapshot]
	server   *http.Server
}

// Snapshot is the configuration in service (admin.SnapshotSource).
func (e *enforcer) Snapshot() *engine.Snapshot { return e.snap.Load() }

// New is a fleet whose enforcers decide with the Redis at redisURL (one
// client, pinged once a second until ctx ends) and keep their files in dir.
func New(ctx context.Context, dir, redisURL string) *Fleet {
	f := &Fleet{
		Refresh:    true,
		dir:        dir,
		backends:   engine.NewBackends(redisURL, os.LookupEnv, limiter.ClientOptions{PoolSize: 4}),
		log:        slog.New(slog.DiscardHandler),
		enforcers:  map[types.UID]*enforcer{},
		namespaces: map[string]*namespace{},
		applied:    make(chan struct{}, 1),
	}
	go f.backends.Monitor(ctx, time.Second, 500*time.Millisecond)
	return f
}

func (f *Fleet) namespace(name string) *namespace {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.namespaces[name]
	if !ok {
		n = &namespace{}
		f.namespaces[name] = n
	}
	return n
}

// SetToken records the namespace's /status token (its admin Secret).
func (f *Fleet) SetToken(ns, token string) { f.namespace(ns).token.value.Store(&token) }

// SetWriteToken records the namespace's write token, which a pushed
// configuration must present.
func (f *Fleet) SetWriteToken(ns, token string) { f.namespace(ns).writeToken.value.Store(&token) }

// SetConfig parses the namespace's ConfigMap data once and has every
// enforcer of the namespace reload it, workers at a time; a configuration
// that does not parse is kept out, as an enforcer keeps its last good one.
func (f *Fleet) SetConfig(ns string, data string, workers int) error {
	cfg, err := config.Parse([]byte(data))
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	n := f.namespace(ns)
	hash := cfg.Hash()
	n.config.Store(cfg)
	n.hash.Store(&hash)
	if !f.Refresh {
		return nil
	}
	var pods []*enforcer
	f.mu.Lock()
	for _, e := range f.enforcers {
		if e.pod.Namespace == ns {
			pods = append(pods, e)
		}
	}
	f.mu.Unlock()
	work := make(chan *enforcer)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for e := range work {
				_ = e.reloader.Reload()
			}
		})
	}
	for _, e := range pods {
		work <- e
	}
	close(work)
	wg.Wait()
	f.signal()
	return nil
}

func (f *Fleet) signal() {
	select {
	case f.applied <- struct{}{}:
	default:
	}
}

// Add starts the enforcer of pod, if it has one and an IP, and is not
// running yet at that address.
func (f *Fleet) Add(pod *corev1.Pod) error {
	addr, ok := adminAddress(pod)
	if !ok {
		return nil
	}
	f.mu.Lock()
	old, running := f.enforcers[pod.UID]
	f.mu.Unlock()
	if running && old.addr == addr {
		return nil
	}
	if running {
		f.Remove(pod.UID)
	}
	n := f.namespace(pod.Namespace)
	labelsPath := filepath.Join(f.dir, string(pod.UID)+".labels")
	if err := os.WriteFile(labelsPath, downwardLabels(pod.Labels), 0o600); err != nil {
		return err
	}
	e := &enforcer{pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, addr: addr}
	source := &reload.Source{LabelsPath: labelsPath, Load: func() (*config.Config, error) {
		if cfg := n.config.Load(); cfg != nil {
			return cfg, nil
		}
		return nil, fmt.Errorf("no configuration in namespace %s yet", pod.Namespace)
	}}
	e.reloader = reload.NewReloader(source, func(l *reload.Loaded) error {
		snap, err := engine.NewSnapshot(l.ForPod(), f.backends)
		if err != nil {
			return err
		}
		e.snap.Store(snap)
		return nil
	}, nil, f.log)
	if err := e.reloader.Start(); err != nil {
		// As a pod started before its ConfigMap: it waits, unready.
		e.snap.Store(nil)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("pod %s: %w", e.pod, err)
	}
	handler := admin.New(admin.Options{
		Pod:       status.Pod{Name: pod.Name, Namespace: pod.Namespace},
		Version:   "fleet",
		StartedAt: time.Now().UTC(),
		Snapshots: e, Reloads: e.reloader, StatusToken: &n.token, WriteToken: &n.writeToken, Delivery: pushed{e, f},
	})
	e.server = &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = e.server.Serve(ln) }()
	f.mu.Lock()
	f.enforcers[pod.UID] = e
	f.mu.Unlock()
	f.signal()
	return nil
}

// pushed takes the manager's pushes into the enforcer's reloader, and
// wakes WaitApplied.
type pushed struct {
	e *enforcer
	f *Fleet
}

func (p pushed) Offer(c reload.Pushed) (reload.Outcome, error) {
	out, err := p.e.reloader.Offer(c)
	p.f.signal()
	return out, err
}

// Remove stops the enforcer of the pod with uid.
func (f *Fleet) Remove(uid types.UID) {
	f.mu.Lock()
	e, ok := f.enforcers[uid]
	delete(f.enforcers, uid)
	f.mu.Unlock()
	if ok {
		_ = e.server.Close()
		_ = os.Remove(filepath.Join(f.dir, string(uid)+".labels"))
	}
}

// Close stops every enforcer and the Redis client.
func (f *Fleet) Close() {
	f.mu.Lock()
	uids := make([]types.UID, 0, len(f.enforcers))
	for uid := range f.enforcers {
		uids = append(uids, uid)
	}
	f.mu.Unlock()
	for _, uid := range uids {
		f.Remove(uid)
	}
	f.backends.Close()
}

// Count is the number of enforcers running.
func (f *Fleet) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.enforcers)
}

// Behind counts the enforcers of namespace ns (all namespaces when empty)
// that do not serve the namespace's current configuration.
func (f *Fleet) Behind(ns string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	behind := 0
	for _, e := range f.enforcers {
		if ns != "" && e.pod.Namespace != ns {
			continue
		}
		want := f.namespaces[e.pod.Namespace].hash.Load()
		if want == nil || e.reloader.State().Hash != *want {
			behind++
		}
	}
	return behind
}

// WaitApplied waits until every enforcer of ns serves the namespace's
// current configuration.
func (f *Fleet) WaitApplied(ctx context.Context, ns string) error {
	for f.Behind(ns) > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d enforcers of %s behind: %w", f.Behind(ns), ns, ctx.Err())
		case <-f.applied:
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// adminAddress is where the pod's enforcer serves /status, if it has one
// and an IP.
func adminAddress(pod *corev1.Pod) (string, bool) {
	c := inject.EnforcerContainer(pod)
	if c == nil || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
		return "", false
	}
	for _, p := range c.Ports {
		if p.Name == wellknown.AdminPortName {
			return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(p.ContainerPort))), true
		}
	}
	return "", false
}

// downwardLabels renders labels as the downward API writes metadata.labels.
func downwardLabels(labels map[string]string) []byte {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		b = fmt.Appendf(b, "%s=%q\n", k, labels[k])
	}
	return b
}

// PolicyGeneration is the generation of the policy named name in the
// namespace's configuration the fleet holds; 0 without one.
func (f *Fleet) PolicyGeneration(ns, name string) int64 {
	cfg := f.namespace(ns).config.Load()
	if cfg == nil {
		return 0
	}
	for _, p := range cfg.Policies {
		if p.Name == name {
			return p.Generation
		}
	}
	return 0
}
