package reload

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/enforcer/config"
)

// ApplyFunc puts a loaded configuration into service (builds the route table
// and swaps it in). When it fails, the previous configuration stays.
type ApplyFunc func(*Loaded) error

// State is what the Reloader knows of the configuration in service.
type State struct {
	// Hash is config.Config.Hash of the configuration in service (all
	// policies read, before selection by labels).
	Hash string
	// Config is the configuration in service, reduced to this pod's policies.
	Config   *config.Config
	LoadedAt time.Time
	// Reloads counts configurations put into service after the first;
	// Errors counts loads or applies that failed.
	Reloads, Errors int64
	// LastError is why the last attempt failed, empty once one succeeds.
	LastError   string
	LastErrorAt time.Time
}

// Observer is told the outcome of every reload attempt (metrics).
type Observer interface {
	Reloaded(hash string)
	ReloadFailed()
}

// Reloader loads a Source and applies it: once at start, then whenever
// Reload is called (by a Watcher). It never replaces a working configuration
// with one that fails to load or apply.
type Reloader struct {
	source   *Source
	apply    ApplyFunc
	observer Observer
	log      *slog.Logger

	mu      sync.Mutex // serializes reloads and guards the fields below
	current *Loaded
	state   State
}

// NewReloader applies configurations from source with apply; observer may be nil.
func NewReloader(source *Source, apply ApplyFunc, observer Observer, log *slog.Logger) *Reloader {
	return &Reloader{source: source, apply: apply, observer: observer, log: log}
}

// Start loads and applies the configuration for the first time: an error
// here should stop the enforcer, as it has nothing to enforce. A compiled
// configuration file that does not exist yet is the exception: a pod can
// start before the operator has written its namespace's ConfigMap (the
// volume is optional, its directory exists), so the enforcer waits for the
// file, not ready, and Watch loads it when it appears. A missing directory
// is an error like any other.
func (r *Reloader) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, err := r.source.Read()
	if err != nil && r.source.ConfigPath != "" && errors.Is(err, fs.ErrNotExist) && dirExists(r.source.ConfigPath) {
		r.state.LastError, r.state.LastErrorAt = "waiting for the configuration: "+err.Error(), time.Now()
		r.log.Warn("no configuration yet; waiting for it", "error", err)
		return nil
	}
	if err != nil {
		return err
	}
	if err := r.apply(l); err != nil {
		return fmt.Errorf("apply config: %w", err)
	}
	r.serve(l)
	return nil
}

// Reload loads the Source again and applies it if it changed. A failure
// keeps the configuration in service, is logged, counted, and returned.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, err := r.source.Read()
	if err == nil && l.Same(r.current) {
		r.state.LastError = "" // an earlier bad file was put back as it was
		return nil
	}
	if err == nil {
		if err = r.apply(l); err != nil {
			err = fmt.Errorf("apply config: %w", err)
		}
	}
	if err != nil {
		r.state.Errors++
		r.state.LastError, r.state.LastErrorAt = err.Error(), time.Now()
		r.log.Error("config reload failed; keeping the last good config", "error", err, "hash", r.state.Hash)
		if r.observer != nil {
			r.observer.ReloadFailed()
		}
		return err
	}
	r.state.Reloads++
	r.serve(l)
	return nil
}

// serve records l as the configuration in service.
func (r *Reloader) serve(l *Loaded) {
	r.current = l
	r.state.Hash = l.Config.Hash()
	r.state.Config = l.ForPod()
	r.state.LoadedAt = time.Now()
	r.state.LastError = ""
	names := make([]string, len(r.state.Config.Policies))
	for i, p := range r.state.Config.Policies {
		names[i] = fmt.Sprintf("%s@%d", p.Name, p.Generation)
	}
	r.log.Info("config loaded", "hash", r.state.Hash, "namespace", l.Config.Namespace, "policies", names)
	if r.observer != nil {
		r.observer.Reloaded(r.state.Hash)
	}
}

// State is a copy of the current state.
func (r *Reloader) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// Watch reloads on every change of the Source's files until ctx ends.
func (r *Reloader) Watch(ctx context.Context, debounce time.Duration) error {
	w, err := NewWatcher(r.source.Paths(), debounce)
	if err != nil {
		return err
	}
	// A change made between Start and now raised no event (a new pod's
	// ConfigMap is rewritten as the pod itself changes the replica count):
	// look once more, now that changes are watched. While still waiting
	// for a file that is not there, there is nothing to look at.
	if r.serving() || allExist(r.source.Paths()) {
		_ = r.Reload()
	}
	go w.Run(ctx, func() { _ = r.Reload() }, func(err error) {
		r.log.Warn("config watch", "error", err)
	})
	return nil
}

// serving reports whether a configuration is in service.
func (r *Reloader) serving() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current != nil
}

func allExist(paths []string) bool {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

func dirExists(path string) bool {
	info, err := os.Stat(filepath.Dir(path))
	return err == nil && info.IsDir()
}
