package reload

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
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
	// FileMissing says the compiled configuration file was removed (its
	// ConfigMap deleted) after it was put into service: the last good
	// configuration stays in service until a file is there again.
	FileMissing bool
	// Revision is config.Config.Revision of the configuration in service.
	Revision int64
	// Pushes counts configurations the manager pushed that were put into
	// service (the others were in service already, or older).
	Pushes int64
}

// Enforcing says whether the configuration in service limits this pod's
// traffic: false while none is loaded yet or when no policy selects the
// pod, when traffic passes through unlimited.
func (s State) Enforcing() bool { return s.Config != nil && len(s.Config.Policies) > 0 }

// Observer is told the outcome of every reload attempt (metrics).
type Observer interface {
	// Reloaded is a configuration put into service, with the number of
	// policies it applies to this pod (0: traffic passes through).
	Reloaded(hash string, policies int)
	ReloadFailed()
	// FileMissing is told when the configuration file goes (true) and
	// when it is back (false).
	FileMissing(missing bool)
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
	// pushed are the pod's labels a push brought, in force while the labels
	// file still reads fileAtPush (the kubelet has not refreshed it since).
	pushed, fileAtPush map[string]string
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
	if r.fileMissing(err) {
		return err
	}
	if err == nil {
		l = r.newest(l)
	}
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
		r.failed(err)
		r.log.Error("config reload failed; keeping the last good config", "error", err, "hash", r.state.Hash)
		return err
	}
	r.state.Reloads++
	r.serve(l)
	return nil
}

// newest is what a reading of the files puts into service: their
// configuration unless the one in service is newer (a push brought it
// before the kubelet refreshed the file), with the labels the push brought
// while the labels file is as it was at the push.
func (r *Reloader) newest(l *Loaded) *Loaded {
	out := *l
	if r.current != nil && !l.Config.Newer(r.current.Config) && l.Config.Hash() != r.current.Config.Hash() {
		out.Config = r.current.Config
	}
	if r.pushed != nil && maps.Equal(l.Labels, r.fileAtPush) {
		out.Labels = r.pushed
	} else {
		r.pushed, r.fileAtPush = nil, nil
	}
	return &out
}

// failed records a reload that kept the configuration in service.
func (r *Reloader) failed(err error) {
	r.state.Errors++
	r.state.LastError, r.state.LastErrorAt = err.Error(), time.Now()
	if r.observer != nil {
		r.observer.ReloadFailed()
	}
}

// fileMissing follows whether the compiled configuration file, once in
// service, is gone (its ConfigMap deleted by hand, or the manager down as
// it was): the last good configuration stays, and the state says so until
// the file is back. It reports whether the file is missing; the change is
// logged and counted once, not at every look.
func (r *Reloader) fileMissing(readErr error) bool {
	missing := r.current != nil && r.source.ConfigPath != "" && errors.Is(readErr, fs.ErrNotExist)
	if missing == r.state.FileMissing {
		return missing
	}
	r.state.FileMissing = missing
	if missing {
		r.failed(fmt.Errorf("the configuration file was removed; the last good configuration stays in service: %w", readErr))
		r.log.Warn("the configuration file was removed (its ConfigMap deleted?); keeping the last good config",
			"path", r.source.ConfigPath, "hash", r.state.Hash, "enforcing", r.state.Enforcing())
	} else {
		r.log.Info("the configuration file is back", "path", r.source.ConfigPath)
	}
	if r.observer != nil {
		r.observer.FileMissing(missing)
	}
	return missing
}

// serve records l as the configuration in service.
func (r *Reloader) serve(l *Loaded) {
	r.current = l
	r.state.Hash = l.Config.Hash()
	r.state.Revision = l.Config.Revision
	r.state.Config = l.ForPod()
	r.state.LoadedAt = time.Now()
	r.state.LastError = ""
	names := make([]string, len(r.state.Config.Policies))
	for i, p := range r.state.Config.Policies {
		names[i] = fmt.Sprintf("%s@%d", p.Name, p.Generation)
	}
	if len(names) == 0 {
		r.log.Info("config loaded: no policy selects this pod, so its traffic passes through unlimited",
			"hash", r.state.Hash, "namespace", l.Config.Namespace, "policiesInNamespace", len(l.Config.Policies))
	} else {
		r.log.Info("config loaded", "hash", r.state.Hash, "namespace", l.Config.Namespace, "policies", names)
	}
	if r.observer != nil {
		r.observer.Reloaded(r.state.Hash, len(names))
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
	for _, dir := range r.source.Dirs {
		if err := w.AddDir(dir); err != nil {
			_ = w.fs.Close()
			return err
		}
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
